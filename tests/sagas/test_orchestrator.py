"""A saga runs its steps in order, or undoes the ones done, in reverse, and records each move."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from eventcraft.eventstore import EventStore, RecordedEvent
from eventcraft.sagas import (
    Orchestrator,
    RetryPolicy,
    Saga,
    SagaNotParked,
    Step,
    StepContext,
    StepFailure,
)
from eventcraft.sagas import transitions as T

from .services import Ledger, fulfilment


def test_a_saga_whose_steps_succeed_completes_and_feeds_results_forward(
    store: EventStore, tmp_path: Path
) -> None:
    saga = fulfilment(tmp_path / "ledger")
    orchestrator = Orchestrator(store, [saga])
    orchestrator.start(saga, {"order": "42"}, saga_id="42")
    assert orchestrator.run_pending() == 0
    done = orchestrator.state("fulfilment", "42")
    assert done.status == "completed"
    assert Ledger(tmp_path / "ledger").effects() == ["reserve:42", "charge:42", "ship:42"]
    assert done.results["charge"] == {"done": "charge:42"}
    types = [e.type for e in store.read_stream("saga-fulfilment:42")]
    assert types == [
        "SagaStarted",
        *["StepStarted", "StepSucceeded"] * 3,
        "SagaCompleted",
    ]


def test_a_failing_step_is_retried_then_the_done_steps_are_compensated_in_reverse(
    store: EventStore, tmp_path: Path
) -> None:
    saga = fulfilment(tmp_path / "ledger", fail="ship")
    orchestrator = Orchestrator(store, [saga])
    orchestrator.start(saga, {"order": "7"}, saga_id="7")
    orchestrator.run_pending()
    final = orchestrator.state("fulfilment", "7")
    assert final.status == "compensated"
    assert final.attempts["ship"] == 2
    assert "ship refused" in (final.failure or "")
    assert Ledger(tmp_path / "ledger").effects() == [
        "reserve:7",
        "charge:7",
        "refund:7",
        "release:7",
    ]


def test_starting_an_instance_twice_starts_it_once(store: EventStore, tmp_path: Path) -> None:
    saga = fulfilment(tmp_path / "ledger")
    orchestrator = Orchestrator(store, [saga])
    assert orchestrator.start(saga, {"order": "1"}, saga_id="1") == "1"
    assert orchestrator.start(saga, {"order": "1"}, saga_id="1") == "1"
    assert store.stream_version("saga-fulfilment:1") == 1


def test_a_compensation_that_keeps_failing_parks_the_saga_until_retried(
    store: EventStore, tmp_path: Path
) -> None:
    calls: list[str] = []
    healthy = {"refund": False}

    def refund(data: dict[str, object], context: StepContext) -> None:
        calls.append(context.idempotency_key)
        if not healthy["refund"]:
            raise ConnectionError("payments is down")

    saga = _refused_shipment("checkout", refund, refund_tries=2)
    orchestrator = Orchestrator(store, [saga])
    orchestrator.start(saga, {}, saga_id="9")
    assert orchestrator.run_pending() == 1
    (parked,) = orchestrator.parked()
    assert parked.status == "parked" and "payments is down" in (parked.parked_because or "")
    assert calls == ["saga-checkout:9/charge/compensation"] * 2
    healthy["refund"] = True
    assert orchestrator.retry("checkout", "9").status == "compensated"
    assert orchestrator.parked() == []


def test_a_step_past_its_timeout_fails_and_is_compensated_as_possibly_done(
    store: EventStore,
) -> None:
    undone: list[str] = []

    def slow(data: dict[str, object], context: StepContext) -> None:
        import time

        time.sleep(2)

    saga = Saga(
        "slow",
        [Step("call", slow, lambda d, c: undone.append(c.step), timeout=0.2)],
    )
    orchestrator = Orchestrator(store, [saga])
    orchestrator.start(saga, {}, saga_id="1")
    orchestrator.run_pending()
    final = orchestrator.state("slow", "1")
    assert final.status == "compensated" and final.unknown == ["call"]
    assert undone == ["call"]


def test_a_step_past_its_timeout_is_said_to_have_run_past_the_timeout_it_declares(
    store: EventStore,
) -> None:
    """Not past what was left of it once its start was recorded: the user declared 0.05 s."""
    told: list[StepFailure | None] = []

    async def hangs(data: dict[str, object], context: StepContext) -> None:
        import asyncio

        await asyncio.sleep(60)

    def undo(data: dict[str, object], context: StepContext) -> None:
        told.append(context.failure)

    saga = Saga("hanging", [Step("call", hangs, undo, timeout=0.05)])
    orchestrator = Orchestrator(store, [saga])
    orchestrator.start(saga, {}, saga_id="1")
    orchestrator.run_pending()
    said = "step 'call' ran past its timeout of 0.05 s"
    assert told == [StepFailure("call", "StepTimedOut", said)]
    assert orchestrator.state("hanging", "1").failure == f"step call failed: {said}"


@pytest.mark.parametrize("asynchronous", [False, True])
def test_async_actions_run_too(store: EventStore, asynchronous: bool) -> None:
    async def async_action(data: dict[str, object], context: StepContext) -> int:
        return context.attempt

    def plain_action(data: dict[str, object], context: StepContext) -> int:
        return context.attempt

    saga = Saga("tiny", [Step("one", async_action if asynchronous else plain_action)])
    orchestrator = Orchestrator(store, [saga])
    orchestrator.start(saga, {}, saga_id="a")
    orchestrator.run_pending()
    assert orchestrator.state("tiny", "a").results == {"one": 1}


def test_polling_reads_only_what_changed_and_leaves_other_services_sagas_alone(
    store: EventStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ours = fulfilment(tmp_path / "ledger")
    theirs = Saga("billing", [Step("invoice", lambda d, c: None)])
    orchestrator = Orchestrator(store, [ours])
    Orchestrator(store, [theirs]).start(theirs, {}, saga_id="b1")
    for n in range(20):
        orchestrator.start(ours, {"order": str(n)}, saga_id=str(n))
    assert orchestrator.run_pending() == 0  # the billing saga is not ours to run
    assert Orchestrator(store, [theirs]).state("billing", "b1").status == "running"
    loads: list[str] = []
    reading = store.read_stream

    def counted(stream_id: str, *args: Any, **kwargs: Any) -> Iterator[RecordedEvent]:
        loads.append(stream_id)
        return reading(stream_id, *args, **kwargs)

    monkeypatch.setattr(store, "read_stream", counted)
    assert orchestrator.run_pending() == 0
    assert loads == []  # 20 finished instances, none read again
    orchestrator.start(ours, {"order": "new"}, saga_id="new")
    assert orchestrator.run_pending() == 0
    assert set(loads) == {"saga-fulfilment:new"}


def test_a_retried_parked_saga_gets_its_compensation_tries_afresh(store: EventStore) -> None:
    tries: list[int] = []

    def refund(data: dict[str, object], context: StepContext) -> None:
        tries.append(context.attempt)
        if len(tries) <= 6:
            raise ConnectionError("payments is down")

    saga = _refused_shipment("patient", refund, refund_tries=6)
    orchestrator = Orchestrator(store, [saga])
    orchestrator.start(saga, {}, saga_id="1")
    orchestrator.run_pending()
    assert orchestrator.state("patient", "1").status == "parked" and len(tries) == 6
    # Six failed tries are failures, not tries that died with their process.
    assert orchestrator.retry("patient", "1").status == "compensated"
    assert tries == [1, 2, 3, 4, 5, 6, 7]


def test_a_step_whose_tries_keep_dying_with_their_process_fails_as_possibly_done(
    store: EventStore,
) -> None:
    undone: list[str] = []
    saga = Saga("poison", [Step("call", lambda d, c: None, lambda d, c: undone.append(c.step))])
    Orchestrator(store, [saga]).start(saga, {}, saga_id="1")
    for attempt in range(1, 6):  # five orchestrators, each killed inside the step
        store.append(
            "saga-poison:1", [T.step_started("call", attempt, f"dead-{attempt}", 0.0, None)]
        )
    final = Orchestrator(store, [saga]).advance("poison", "1")
    assert final.status == "compensated" and final.unknown == ["call"]
    assert "5 tries ended with no outcome" in (final.failure or "")
    assert undone == ["call"]


def _refused_shipment(name: str, refund: Any, *, refund_tries: int) -> Saga:
    """A saga whose charge succeeds and whose shipping step refuses, so `refund` must run."""

    def refuse(data: dict[str, object], context: StepContext) -> None:
        raise RuntimeError("no courier")

    return Saga(
        name,
        [
            Step("charge", lambda d, c: None, refund, compensation_retry=RetryPolicy(refund_tries)),
            Step("ship", refuse, fails_on=(RuntimeError,)),
        ],
    )


def test_a_step_under_way_when_its_saga_is_cancelled_is_compensated_as_possibly_done(
    store: EventStore, tmp_path: Path
) -> None:
    """The charge takes effect while the cancel is recorded: its owner's outcome comes too
    late to be appended, so the charge is undone as a try that timed out would be."""
    ledger = Ledger(tmp_path / "ledger")
    charging, cancelled = threading.Event(), threading.Event()

    def service(name: str) -> Any:
        def run(data: dict[str, object], context: StepContext) -> None:
            ledger.apply(context.idempotency_key, f"{name}:{context.saga_id}")
            if name == "charge":
                charging.set()
                assert cancelled.wait(30), "the test never cancelled"

        return run

    saga = Saga(
        "checkout",
        [
            Step(n, service(n), service(u))
            for n, u in (("reserve", "release"), ("charge", "refund"), ("ship", "cancel"))
        ],
    )
    worker = Orchestrator(store, [saga])
    worker.start(saga, {}, saga_id="1")
    advancing = threading.Thread(target=worker.advance, args=("checkout", "1"))
    advancing.start()
    assert charging.wait(30), "the charge never started"
    operator = Orchestrator(store, [saga])  # another process's, as a console's would be
    assert operator.cancel("checkout", "1", "customer withdrew")
    cancelled.set()
    advancing.join(30)
    assert ledger.effects() == ["reserve:1", "charge:1", "refund:1", "release:1"]
    final = operator.state("checkout", "1")
    assert (final.status, final.unknown) == ("compensated", ["charge"])
    assert final.failure == "cancelled: customer withdrew"


@pytest.mark.parametrize("action", ["retry", "resolve"])
def test_a_parked_saga_another_operator_settles_meanwhile_is_refused_not_settled_twice(
    store: EventStore, monkeypatch: pytest.MonkeyPatch, action: str
) -> None:
    def refund(data: dict[str, object], context: StepContext) -> None:
        raise ConnectionError("payments is down")

    saga = _refused_shipment("checkout", refund, refund_tries=1)
    mine, theirs = Orchestrator(store, [saga]), Orchestrator(store, [saga])
    mine.start(saga, {}, saga_id="9")
    mine.run_pending()
    read = mine.state

    def read_then_resolved_by_them(name: str, saga_id: str) -> Any:
        current = read(name, saga_id)
        if current.status == "parked":  # between our read and our append
            theirs.resolve(name, saga_id, "refunded by hand")
        return current

    monkeypatch.setattr(mine, "state", read_then_resolved_by_them)
    with pytest.raises(SagaNotParked) as refused:
        if action == "retry":
            mine.retry("checkout", "9")
        else:
            mine.resolve("checkout", "9", "refunded twice")
    assert refused.value.status == "resolved"
    settled = [e for e in store.read_stream("saga-checkout:9") if e.type.startswith("Saga")]
    assert [e.type for e in settled][-1] == "SagaResolved"
    assert [e.data for e in settled if e.type == "SagaResolved"] == [{"note": "refunded by hand"}]
    assert not any(e.type == "SagaRetried" for e in store.read_stream("saga-checkout:9"))
