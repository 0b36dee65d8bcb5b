"""Saga step tries as spans in the trace that started the saga; retries and compensations."""

from __future__ import annotations

import gc
from typing import Any

from eventcraft.eventstore import EventStore
from eventcraft.sagas import Orchestrator, RetryPolicy, Saga, Step, StepContext, wait_for
from opentelemetry import trace
from opentelemetry.trace import StatusCode

from .conftest import Telemetry


def reserve(data: dict[str, Any], context: StepContext) -> str:
    return "r1"


def release(data: dict[str, Any], context: StepContext) -> None:
    return None


def charge(data: dict[str, Any], context: StepContext) -> None:
    raise ConnectionError("the bank is down")


checkout = Saga(
    "checkout",
    [
        Step("reserve", reserve, release),
        Step("charge", charge, retry=RetryPolicy(attempts=2), retry_on=(ConnectionError,)),
    ],
)


def test_retries_and_compensations_are_spans_of_the_starting_trace(
    telemetry: Telemetry, store_url: str
) -> None:
    with EventStore.open(store_url) as store:
        orchestrator = Orchestrator(store, [checkout])
        with trace.get_tracer("test").start_as_current_span("checkout command") as command:
            orchestrator.start(checkout, {}, saga_id="1", correlation_id="c-1")
        orchestrator.run_pending()
        assert orchestrator.state("checkout", "1").status == "compensated"
    tries = [s for s in telemetry.finished() if s.name.startswith("saga checkout")]
    assert [s.name for s in tries] == [
        "saga checkout step reserve",
        "saga checkout step charge",
        "saga checkout step charge",
        "saga checkout compensate reserve",
    ]
    trace_id = command.get_span_context().trace_id
    assert {s.context.trace_id for s in tries} == {trace_id}
    charged = [dict(s.attributes or {}) for s in tries[1:3]]
    assert [a["eventcraft.saga.attempt"] for a in charged] == [1, 2]
    assert {a["eventcraft.saga.outcome"] for a in charged} == {"failed"}
    assert tries[1].status.status_code is StatusCode.ERROR
    assert dict(tries[1].attributes or {})["error.type"] == "ConnectionError"
    undo = dict(tries[3].attributes or {})
    assert undo["eventcraft.saga.compensating"] is True
    assert undo["messaging.message.conversation_id"] == "c-1"
    assert telemetry.total("eventcraft.saga.step.retries") == 1
    assert telemetry.total("eventcraft.saga.compensations") == 1
    assert telemetry.total("eventcraft.saga.step.duration") == 4
    failed = {"eventcraft.saga.outcome": "failed"}
    compensated = {"eventcraft.saga.outcome": "compensated"}
    assert telemetry.total("eventcraft.saga.transitions", **failed) == 1
    assert telemetry.total("eventcraft.saga.transitions", **compensated) == 1


def ours(telemetry: Telemetry) -> list[Any]:
    """The gauge's points of this test's sagas: an orchestrator another test left alive
    (held by something the collector cannot free yet) reports its own."""
    return [
        point
        for point in telemetry.points("eventcraft.saga.instances")
        if point.attributes["eventcraft.saga.name"] in ("payment", "checkout")
    ]


def test_unfinished_instances_are_a_gauge_by_saga_and_status(
    telemetry: Telemetry, sqlite_url: str
) -> None:
    # Orchestrators of earlier tests, held only by reference cycles, would still show in
    # the gauge (it reports those of every live orchestrator).
    gc.collect()
    waiting = Saga("payment", [wait_for("pay", "PaymentReceived")])
    with EventStore.open(sqlite_url) as store:
        orchestrator = Orchestrator(store, [waiting, checkout])
        orchestrator.start(waiting, {}, saga_id="1")
        orchestrator.start(waiting, {}, saga_id="2")
        orchestrator.start(checkout, {}, saga_id="3")
        assert ours(telemetry) == []  # not looked up yet
        assert orchestrator.run_pending() == 2
        # As the last pass looked them up: checkout 3 was active then, and ended in the pass.
        assert len(ours(telemetry)) == 2
        assert orchestrator.run_pending() == 2
        (active,) = ours(telemetry)
    assert active.attributes == {
        "eventcraft.saga.name": "payment",
        "eventcraft.saga.status": "active",
    }
    assert active.value == 2
