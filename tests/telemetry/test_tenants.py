"""A tenant's store, and the projections and sagas kept in it, say whose they are: the
`eventcraft.tenant` attribute on their spans and metrics, and a lag per tenant."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from eventcraft.eventstore import EventStore, NewEvent, RecordedEvent, Tenants
from eventcraft.eventstore.telemetry import TENANT
from eventcraft.projections import Projection, ProjectionRunner, ReadModel, TenantsRunner
from eventcraft.sagas import Saga, Step, StepContext, TenantsOrchestrator, wait_for
from opentelemetry.sdk.trace import ReadableSpan

from .conftest import Telemetry

seen_table = sa.Table(
    "telemetry_tenant_seen", sa.MetaData(), sa.Column("position", sa.BigInteger, primary_key=True)
)


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def seen() -> Projection:
    projection = Projection("seen", tables=[seen_table])

    @projection.on("Placed")
    def placed(read_model: ReadModel, event: RecordedEvent) -> None:
        read_model.execute(sa.insert(read_model[seen_table]).values(position=event.position))

    return projection


def test_appends_and_reads_of_a_tenants_store_carry_its_tenant(
    telemetry: Telemetry, tmp_path: Path
) -> None:
    with Tenants(f"sqlite:///{tmp_path}/{{tenant}}.db") as tenants:
        tenants.for_tenant("acme").append("order-1", [NewEvent("Placed", {})])
        globex = tenants.for_tenant("globex")
        globex.append("order-1", [NewEvent("Placed", {}), NewEvent("Paid", {})])
        list(globex.read_all())
    with EventStore.open(f"sqlite:///{tmp_path}/{{tenant}}.db?tenant=acme") as acme:
        acme.append("order-2", [NewEvent("Placed", {})])
    with EventStore.open("memory://") as plain:
        plain.append("order-1", [NewEvent("Placed", {})])
    spans = telemetry.finished("publish order")
    assert sorted(str(attributes(s).get(TENANT)) for s in spans) == [
        "None",
        "acme",
        "acme",
        "globex",
    ]
    assert telemetry.total("eventcraft.store.appended_events", **{TENANT: "acme"}) == 2
    assert telemetry.total("eventcraft.store.appended_events", **{TENANT: "globex"}) == 2
    assert telemetry.total("eventcraft.store.appended_events") == 5
    assert telemetry.total("eventcraft.store.reads", **{TENANT: "globex"}) == 1
    assert telemetry.total("eventcraft.store.reads", **{TENANT: "acme"}) == 0


def test_a_tenants_projection_batches_and_lag_carry_its_tenant(
    telemetry: Telemetry, tmp_path: Path
) -> None:
    with Tenants(f"sqlite:///{tmp_path}/{{tenant}}.db", most_open=2) as tenants:
        for tenant, count in [("acme", 3), ("globex", 1), ("initech", 2)]:
            events = [NewEvent("Placed", {}) for _ in range(count)]
            tenants.for_tenant(tenant).append("order-1", events)
        with TenantsRunner(tenants, [seen()], batch_size=2) as runner:
            runner.catch_up("acme", "globex", "initech")
            more = [NewEvent("Placed", {}) for _ in range(4)]
            tenants.for_tenant("globex").append("order-2", more)
            runner.nudge("globex")  # its turn sees the 4 new events, applies a batch of 2
            with runner._turns.claimed("globex"):  # one turn, as a worker takes it
                assert runner._one_turn("globex", raising=True)
            lags = {
                (p.attributes[TENANT], p.attributes["messaging.consumer.group.name"]): p.value
                for p in telemetry.points("eventcraft.projection.lag")
            }
        # One store's ProjectionRunner on a tenant's store says the tenant too.
        with ProjectionRunner(tenants.for_tenant("initech"), [seen()]):
            single_lag = {
                p.attributes.get(TENANT): p.value
                for p in telemetry.points("eventcraft.projection.lag")
            }
    assert lags == {("acme", "seen"): 0, ("globex", "seen"): 2, ("initech", "seen"): 0}
    assert single_lag == {"initech": 0}
    batches = telemetry.finished("process seen")
    by_tenant: dict[str, int] = {}
    for span in batches:
        tenant = attributes(span)[TENANT]
        by_tenant[tenant] = (
            by_tenant.get(tenant, 0) + attributes(span)["messaging.batch.message_count"]
        )
    assert by_tenant == {"acme": 3, "globex": 3, "initech": 2}
    assert telemetry.total("eventcraft.projection.events", **{TENANT: "acme"}) == 3
    assert telemetry.total("eventcraft.projection.events", **{TENANT: "globex"}) == 3


def test_a_tenants_saga_steps_and_instances_carry_its_tenant(
    telemetry: Telemetry, tmp_path: Path
) -> None:
    def book(data: dict[str, object], context: StepContext) -> None:
        return None

    booking = Saga("booking", [Step("book", book), wait_for("arrival", "GuestArrived")])
    gc.collect()  # as in test_sagas.py: an earlier test's orchestrators out of the gauge
    with (
        Tenants(f"sqlite:///{tmp_path}/{{tenant}}.db", most_open=2) as tenants,
        TenantsOrchestrator(tenants, [booking], discover=None) as service,
    ):
        for tenant, count in [("acme", 2), ("globex", 1)]:
            for n in range(count):  # the same saga ids in both tenants
                service.start_saga(tenant, booking, {}, saga_id=f"b-{n}")
        service.run_pending()
        # The gauge reads every orchestrator alive in the process: an earlier test's, not
        # yet collected, gives points of no tenant, which are not this test's.
        instances = {
            (p.attributes[TENANT], p.attributes["eventcraft.saga.status"]): p.value
            for p in telemetry.points("eventcraft.saga.instances")
            if TENANT in (p.attributes or {})
        }
    steps = telemetry.finished("saga booking step book")
    assert sorted(attributes(s)[TENANT] for s in steps) == ["acme", "acme", "globex"]
    assert telemetry.total("eventcraft.saga.step.tries", **{TENANT: "acme"}) == 2
    assert telemetry.total("eventcraft.saga.step.tries", **{TENANT: "globex"}) == 1
    assert instances == {("acme", "active"): 2, ("globex", "active"): 1}
