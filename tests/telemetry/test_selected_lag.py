"""The lag gauges count what a projection would apply: 0 on a log of events it does not
read, k with k of its events after its checkpoint; the console's /metrics alike."""

from __future__ import annotations

from eventcraft.eventstore import EventStore
from eventcraft.messaging import RabbitMQPublisher, Relay
from eventcraft.projections import ProjectionRunner
from starlette.testclient import TestClient

from eventcraft.console import create_app
from eventcraft.operations import projections
from tests.console.conftest import LOCAL
from tests.console.lag_app import app, kept, noise, wanted, wanted_events

from .conftest import Telemetry
from .test_console_metrics import sample

RELAY_LAG = "eventcraft.relay.lag"


def _gauge(telemetry: Telemetry, metric: str) -> dict[str, float]:
    return {
        p.attributes["messaging.consumer.group.name"]: p.value for p in telemetry.points(metric)
    }


def test_the_lag_gauges_count_only_the_events_a_projection_reads(
    telemetry: Telemetry, shared_store_url: str
) -> None:
    with (
        EventStore.open(shared_store_url) as store,
        ProjectionRunner(store, [wanted, kept], lease_ttl=None) as runner,
    ):
        noise(store)
        idle = _gauge(telemetry, "eventcraft.projection.lag")
        idle_age = _gauge(telemetry, "eventcraft.projection.lag.duration")
        wanted_events(store, 3, kept=2)
        behind = _gauge(telemetry, "eventcraft.projection.lag")
        behind_age = _gauge(telemetry, "eventcraft.projection.lag.duration")
        runner.catch_up()
        current = _gauge(telemetry, "eventcraft.projection.lag")
    assert idle == {"wanted": 0, "kept": 0}
    assert idle_age == {"wanted": 0.0, "kept": 0.0}
    assert behind == {"wanted": 3, "kept": 2}
    assert all(age > 0.0 for age in behind_age.values())
    assert current == {"wanted": 0, "kept": 0}


def test_the_consoles_metrics_count_only_the_events_a_projection_reads(
    no_provider: None, store: EventStore
) -> None:
    wanted_events(store, 1, kept=1)
    projections.catch_up(store, app)
    noise(store)
    group = "messaging_consumer_group_name"

    def scraped() -> str:
        with TestClient(create_app(store, app, metrics=True), base_url=LOCAL) as client:
            return client.get("/metrics").text

    idle = scraped()
    assert sample(idle, "eventcraft_projection_lag", **{group: "wanted"}) == 0
    assert sample(idle, "eventcraft_projection_lag", **{group: "kept"}) == 0
    assert sample(idle, "eventcraft_projection_lag_duration_seconds", **{group: "wanted"}) == 0
    wanted_events(store, 2, kept=1)
    behind = scraped()
    assert sample(behind, "eventcraft_projection_lag", **{group: "wanted"}) == 2
    assert sample(behind, "eventcraft_projection_lag", **{group: "kept"}) == 1


def test_the_relay_lag_gauge_counts_only_the_events_a_relay_selects(
    telemetry: Telemetry, sqlite_url: str
) -> None:
    nowhere = "amqp://guest:guest@127.0.0.1:9/"
    with (
        EventStore.open(sqlite_url) as store,
        Relay("orders-out", store, RabbitMQPublisher(nowhere), types="Wanted", categories="order"),
    ):
        noise(store)
        idle = {p.attributes["eventcraft.relay"]: p.value for p in telemetry.points(RELAY_LAG)}
        wanted_events(store, 2, kept=0)
        behind = {p.attributes["eventcraft.relay"]: p.value for p in telemetry.points(RELAY_LAG)}
    assert idle == {"orders-out": 0}
    assert behind == {"orders-out": 2}
