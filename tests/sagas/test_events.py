"""Sagas driven by the log: waiting for events, a process manager, request-reply."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from eventcraft.domain import caused_by
from eventcraft.eventstore import AppendResult, EventStore, NewEvent, RecordedEvent
from eventcraft.projections import ProjectionRunner
from eventcraft.sagas import (
    Orchestrator,
    ProcessManager,
    ReplyTimeout,
    Route,
    Saga,
    Step,
    StepContext,
    request,
    wait_for,
)

undone: list[str] = []


def _note(data: dict[str, Any], context: StepContext) -> str:
    return f"{context.step} for {data['order_id']}"


def _undo(data: dict[str, Any], context: StepContext) -> None:
    undone.append(f"{context.step} {data['order_id']}")


checkout = Saga(
    "checkout",
    [
        Step("reserve", _note, _undo),
        wait_for("payment", "PaymentReceived", timeout=30),
        Step("ship", _note, _undo),
    ],
)


def test_a_waiting_step_completes_with_the_signalled_event(store: EventStore) -> None:
    orchestrator = Orchestrator(store, [checkout])
    orchestrator.start(checkout, {"order_id": "1"}, saga_id="1")
    assert orchestrator.advance("checkout", "1").status == "running"  # waits for the payment
    store.append("payment-1", [NewEvent("PaymentReceived", {"cents": 900})])
    (payment,) = store.read_stream("payment-1")
    assert orchestrator.signal("checkout", "1", payment)
    assert orchestrator.signal("checkout", "1", payment)  # delivered twice, recorded once
    done = orchestrator.advance("checkout", "1")
    assert done.status == "completed" and done.results["payment"] == {"cents": 900}
    types = [e.type for e in store.read_stream(done.stream_id)]
    assert types.count("SagaSignalled") == 1


def test_a_wait_past_its_timeout_compensates_even_after_a_restart(store: EventStore) -> None:
    undone.clear()
    Orchestrator(store, [checkout]).start(checkout, {"order_id": "2"}, saga_id="2")
    Orchestrator(store, [checkout]).advance("checkout", "2")
    # Another process, 31 s later: the deadline was stored, not held in a timer.
    later = Orchestrator(store, [checkout], clock=lambda: time.time() + 31)
    final = later.advance("checkout", "2")
    assert final.status == "compensated"
    assert "no PaymentReceived within 30" in (final.failure or "")
    assert undone == ["reserve 2"]


def test_a_process_manager_starts_signals_and_cancels_sagas_from_the_log(
    store: EventStore,
) -> None:
    undone.clear()
    orchestrator = Orchestrator(store, [checkout])
    order_id = lambda event: str(event.data["order_id"])  # noqa: E731
    manager = ProcessManager(
        "checkout-manager",
        orchestrator,
        [
            Route("OrderPlaced", checkout, "start", order_id, when=lambda e: e.data["cents"] > 0),
            Route("PaymentReceived", checkout, "signal", order_id),
            Route("OrderCancelled", checkout, "cancel", order_id),
        ],
    )
    with ProjectionRunner(store, [manager.subscription()]) as runner:
        placed = NewEvent("OrderPlaced", {"order_id": 7, "cents": 900}, {"correlation_id": "web-7"})
        store.append("order-7", [placed])
        store.append("order-8", [NewEvent("OrderPlaced", {"order_id": 8, "cents": 500})])
        store.append("order-9", [NewEvent("OrderPlaced", {"order_id": 9, "cents": 0})])
        runner.catch_up()
        assert orchestrator.run_pending() == 2  # both wait for their payment
        store.append("payment-7", [NewEvent("PaymentReceived", {"order_id": 7})])
        store.append("order-8", [NewEvent("OrderCancelled", {"order_id": 8})])
        runner.catch_up()
        assert orchestrator.run_pending() == 0
    assert orchestrator.state("checkout", "7").status == "completed"
    assert orchestrator.state("checkout", "7").correlation_id == "web-7"  # the conversation goes on
    assert orchestrator.state("checkout", "8").status == "compensated"
    assert undone == ["reserve 8"]
    assert [s.saga_id for s in orchestrator.instances()] == ["7", "8"]  # 9 was not routed


def test_a_request_gets_the_event_caused_by_it_or_times_out(store: EventStore) -> None:
    def payments_service() -> None:
        store.wait_for_events(0, timeout=10)
        (command,) = store.read_all(types="ChargeCard")
        store.append(
            "payment-x", [NewEvent("CardCharged", {"ok": True}, {"causation_id": "other"})]
        )
        with caused_by(command) as context:
            metadata = {
                "correlation_id": context.correlation_id,
                "causation_id": context.causation_id,
            }
            store.append("payment-x", [NewEvent("CardCharged", {"cents": 5}, metadata)])

    service = threading.Thread(target=payments_service)
    service.start()
    charge = NewEvent("ChargeCard", {"cents": 5})
    reply = request(store, "payments-commands", charge, reply_types=["CardCharged"], timeout=10)
    service.join()
    assert reply.data == {"cents": 5} and reply.metadata["causation_id"] == str(charge.id)
    with pytest.raises(ReplyTimeout, match="no CardCharged replied to ChargeCard"):
        request(
            store,
            "payments-commands",
            NewEvent("ChargeCard", {}),
            reply_types=["CardCharged"],
            timeout=0.2,
        )


def test_a_request_waiting_behind_events_of_other_types_sleeps_until_more_arrive(
    store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another service writes right after the command; the request reads past its event
    once, then sleeps on the store's wake-up until its timeout, reading nothing again."""
    appending, reading = store.append, store.read_all
    reads: list[int] = []

    def followed_by_another_service(stream_id: str, *args: Any, **kwargs: Any) -> AppendResult:
        done = appending(stream_id, *args, **kwargs)
        appending("audit-1", [NewEvent("Audited", {})])
        return done

    def counted(*args: Any, **kwargs: Any) -> Iterator[RecordedEvent]:
        reads.append(kwargs["after"])
        return reading(*args, **kwargs)

    monkeypatch.setattr(store, "append", followed_by_another_service)
    monkeypatch.setattr(store, "read_all", counted)
    with pytest.raises(ReplyTimeout):
        request(
            store,
            "payments-commands",
            NewEvent("ChargeCard", {}),
            reply_types=["CardCharged"],
            timeout=0.5,
        )
    assert len(reads) == 1
