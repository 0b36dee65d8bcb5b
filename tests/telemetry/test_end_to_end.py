"""A command followed through its append, a projection in another thread and a saga step."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from eventcraft.domain import Repository, command_context
from eventcraft.eventstore import EventStore, RecordedEvent
from eventcraft.projections import Projection, ProjectionRunner, ReadModel
from eventcraft.sagas import Orchestrator, ProcessManager, Route, Saga, Step, StepContext
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind

from examples.orders import Order

from .conftest import Telemetry

placed_table = sa.Table(
    "telemetry_placed",
    sa.MetaData(),
    sa.Column("order_id", sa.Text, primary_key=True),
)


def placed_orders() -> Projection:
    projection = Projection("placed-orders", tables=[placed_table])

    @projection.on("OrderPlaced")
    def placed(read_model: ReadModel, event: RecordedEvent) -> None:
        read_model.execute(sa.insert(read_model[placed_table]).values(order_id=event.stream_id))

    return projection


reserved: list[str] = []


def reserve(data: dict[str, Any], context: StepContext) -> dict[str, str]:
    reserved.append(context.idempotency_key)
    return {"reservation": data["order"]}


fulfil = Saga("fulfil", [Step("reserve", reserve)])


@pytest.mark.slow
def test_one_trace_from_a_command_to_its_projection_and_saga_step(
    telemetry: Telemetry, shared_store_url: str
) -> None:
    reserved.clear()
    tracer = trace.get_tracer("test")
    with EventStore.open(shared_store_url) as store:
        orchestrator = Orchestrator(store, [fulfil])
        manager = ProcessManager(
            "fulfilment",
            orchestrator,
            [Route("OrderPlaced", fulfil, "start", lambda e: e.stream_id, data=_order)],
        )
        repository = Repository(store, Order)
        with ProjectionRunner(store, [placed_orders(), manager.subscription()]) as runner:
            runner.start()  # the projections follow the log in threads of their own
            with (
                tracer.start_as_current_span("place order") as command,
                command_context(correlation_id="web-1"),
            ):
                repository.execute("1", lambda order: order.place("ada"), create=True)
            runner.wait_until(store.high_water_mark())
        # Later, outside the command's context: the step still joins its trace.
        assert orchestrator.run_pending() == 0
    assert reserved == ["saga-fulfil:order-1/reserve"]

    trace_id = command.get_span_context().trace_id
    finished = telemetry.finished()
    in_trace = sorted(s.name for s in finished if s.context.trace_id == trace_id)
    # One of each; the saga's later transitions are appended in the orchestrator's own context.
    spans = {s.name: s for s in finished if s.context.trace_id == trace_id}
    spans["process placed-orders"] = next(s for s in finished if s.name == "process placed-orders")
    assert in_trace == [
        "handle fulfilment",
        "load order",
        "place order",
        "publish order",
        "publish saga",
        "saga fulfil step reserve",
    ]
    publish = spans["publish order"]
    assert _parent(publish) == command.get_span_context().span_id
    assert _attributes(publish)["messaging.destination.name"] == "order-1"
    load = spans["load order"]
    assert _attributes(load)["eventcraft.aggregate.events_read"] == 0
    assert _attributes(load)["eventcraft.aggregate.snapshot_used"] is False

    # The projection's batch is a trace of its own, linked to the append.
    batch = spans["process placed-orders"]
    assert batch.kind is SpanKind.CONSUMER
    assert batch.context.trace_id != trace_id
    assert [link.context.span_id for link in batch.links] == [publish.context.span_id]
    assert _attributes(batch)["messaging.consumer.group.name"] == "placed-orders"

    handled = spans["handle fulfilment"]
    assert handled.kind is SpanKind.CONSUMER
    assert _parent(handled) == publish.context.span_id
    step = spans["saga fulfil step reserve"]
    assert _attributes(step) == {
        "messaging.system": "eventcraft",
        "messaging.message.conversation_id": "web-1",
        "eventcraft.saga.name": "fulfil",
        "eventcraft.saga.id": "order-1",
        "eventcraft.saga.step": "reserve",
        "eventcraft.saga.attempt": 1,
        "eventcraft.saga.idempotency_key": "saga-fulfil:order-1/reserve",
        "eventcraft.saga.compensating": False,
        "eventcraft.saga.outcome": "succeeded",
    }
    assert _parent(step) == spans["publish saga"].context.span_id
    completed = {"eventcraft.saga.outcome": "completed"}
    assert telemetry.total("eventcraft.saga.transitions", **completed) == 1


def _order(event: RecordedEvent) -> dict[str, Any]:
    return {"order": event.stream_id}


def _parent(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


def _attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})
