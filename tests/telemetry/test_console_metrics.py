"""`/metrics` on the console: the App's projections and this process's metrics for Prometheus."""

from __future__ import annotations

import re

import pytest
from eventcraft.eventstore import EventStore, NewEvent
from starlette.testclient import TestClient

from eventcraft.console import create_app

from ..cli.apps import shop
from ..cli.conftest import Run
from ..cli.conftest import run as run  # the fixture running `eventcraft ...` here
from ..console.conftest import LOCAL, POISON_AT, fill_console


def sample(text: str, name: str, **labels: str) -> float:
    """The value of the sample `name` whose labels include `labels`."""
    for line in text.splitlines():
        match = re.fullmatch(rf"{name}(?:\{{(.*)\}})? (\S+)", line)
        if match is None:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1) or ""))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(match.group(2))
    raise AssertionError(f"no sample {name} {labels} in:\n{text}")


@pytest.mark.slow
def test_the_console_serves_projection_lag_and_appends_to_prometheus(
    no_provider: None, store: EventStore
) -> None:
    fill_console(store)
    with TestClient(create_app(store, shop, metrics=True), base_url=LOCAL) as client:
        store.append("order-99", [NewEvent("OrderPlaced", {"order_id": "99", "cents": 5})])
        response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=")
    text = response.text
    group = "messaging_consumer_group_name"
    assert sample(text, "eventcraft_projection_parked", **{group: "order-notes"}) == 1
    head = store.high_water_mark()
    assert sample(text, "eventcraft_store_high_water_mark") == head
    # order-notes stopped just below the poisoned event: all it reads after it is behind
    behind = [e for e in store.read_all(after=POISON_AT - 1) if e.type == "OrderPlaced"]
    assert sample(text, "eventcraft_projection_lag", **{group: "order-notes"}) == len(behind)
    assert sample(text, "eventcraft_projection_lag_duration_seconds", **{group: "order-notes"}) > 0
    # the console's provider is the process's: the append above was counted
    outcome = {"eventcraft_outcome": "ok", "messaging_destination_template": "order"}
    assert sample(text, "eventcraft_store_appends_total", **outcome) == 1


def test_without_metrics_there_is_no_metrics_page(store: EventStore) -> None:
    with TestClient(create_app(store, shop), base_url=LOCAL) as client:
        assert client.get("/metrics").status_code == 404


def test_the_console_command_offers_metrics(run: Run) -> None:
    outcome = run("console", "--help")
    assert outcome.code == 0
    assert "--metrics" in outcome.out
    assert "Prometheus" in outcome.out
