"""Kill the orchestrator (SIGKILL) at every transition: a restarted one finishes the saga,
and each service's effect is applied once."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from eventcraft.eventstore import EventStore
from eventcraft.sagas import Orchestrator

from examples.fulfilment import inventory, order_fulfilment, payments, shipping

from ..processes import PROCESSES
from .later import Later
from .services import Ledger, fulfilment
from .workers import run_example_and_crash, run_until_hung, use_journals

COMPLETED = {"inventory": ["reserve"], "payments": ["charge"], "shipping": ["book"]}
COMPENSATED = {
    "inventory": ["reserve", "release"],
    "payments": ["charge", "refund"],
    "shipping": [],
}
UNDONE = ["reserve:1", "charge:1", "refund:1", "release:1"]  # the hanging test's own saga
# Transitions (appends to the saga's stream) on each path of the example saga:
HAPPY_APPENDS = 5  # started; reserve started; then each outcome with the next move's start
FAILING_APPENDS = 7  # started, reserve, charge, ship (refused: not retried), 2 compensations, end


def crash_then_recover(
    url: str, directory: Path, shipping_fails: bool, crash_after: int, crash_on: str | None
) -> tuple[str, dict[str, list[str]]]:
    """Run the example saga in a process that dies, then finish it here: (status, effects)."""
    worker = PROCESSES.Process(
        target=run_example_and_crash,
        args=(url, str(directory), shipping_fails, crash_after, crash_on),
    )
    worker.start()
    worker.join(120)
    assert worker.exitcode == -signal.SIGKILL, f"the worker was meant to die, not {worker.exitcode}"
    use_journals(directory, shipping_fails=shipping_fails)
    with Later.open(url) as store:
        # The dead owner's leases (30 s at most) lapse: the database's clock, read a minute
        # on, says so at once; the orchestrator's, 31 s ahead, that its deadlines passed.
        recovering = Orchestrator(store, [order_fulfilment], clock=lambda: time.time() + 31)
        assert recovering.run_pending() == 0
        status = recovering.state(order_fulfilment.name, "1").status
    effects = {s.name: s.operations() for s in (inventory, payments, shipping)}
    return status, effects


def killed_inside_the_charge(url: str, directory: Path, attempts: int) -> Path:
    """Run order 1 (steps of 30 s) in a process killed once its charge took effect and
    hangs; the ledger of its effects."""
    ledger = directory / "ledger"
    worker = PROCESSES.Process(
        target=run_until_hung, args=(url, str(ledger), "charge", 30, attempts)
    )
    worker.start()
    deadline = time.monotonic() + 120
    while not (directory / "hanging").exists():
        assert worker.is_alive() and time.monotonic() < deadline, "the worker never hung"
        time.sleep(0.01)
    os.kill(worker.pid or 0, signal.SIGKILL)
    worker.join()
    return ledger


@pytest.mark.parametrize("crash_after", range(1, HAPPY_APPENDS))
def test_a_crash_after_any_transition_still_completes_each_step_once(
    shared_store_url: str, tmp_path: Path, crash_after: int
) -> None:
    status, effects = crash_then_recover(shared_store_url, tmp_path, False, crash_after, None)
    assert (status, effects) == ("completed", COMPLETED)


@pytest.mark.parametrize("crash_after", range(1, FAILING_APPENDS))
def test_a_crash_after_any_transition_of_a_failing_saga_still_compensates_once(
    shared_store_url: str, tmp_path: Path, crash_after: int
) -> None:
    status, effects = crash_then_recover(shared_store_url, tmp_path, True, crash_after, None)
    # After transition 4 the courier's try was under way: taken over past its timeout, it
    # counts as a try that timed out, and a try is left, which the courier refuses: a
    # business failure, known not to have taken effect, so nothing is cancelled.
    assert (status, effects) == ("compensated", {**COMPENSATED, "shipping": []})


@pytest.mark.parametrize(
    ("shipping_fails", "crash_on"),
    [
        (False, "inventory.reserve"),
        (False, "payments.charge"),
        (False, "shipping.book"),
        (True, "payments.refund"),
        (True, "inventory.release"),
    ],
)
def test_a_step_done_but_not_recorded_is_retried_with_its_key_and_takes_effect_once(
    shared_store_url: str, tmp_path: Path, shipping_fails: bool, crash_on: str
) -> None:
    status, effects = crash_then_recover(shared_store_url, tmp_path, shipping_fails, 0, crash_on)
    expected = ("compensated", COMPENSATED) if shipping_fails else ("completed", COMPLETED)
    assert (status, effects) == expected


@pytest.mark.parametrize("attempts", [1, 2])
def test_a_step_that_hangs_when_its_process_dies_times_out_after_the_restart(
    shared_store_url: str, tmp_path: Path, attempts: int
) -> None:
    """The deadline is in the stream: once it passes, the next orchestrator counts the try
    as timed out. With a try left it tries again with the same key (the effect, already
    applied, is not applied twice); with none, it compensates the step with the others."""
    ledger = killed_inside_the_charge(shared_store_url, tmp_path, attempts)
    saga = fulfilment(ledger, timeout=30, attempts=attempts)
    with EventStore.open(shared_store_url) as store:
        before_deadline = Orchestrator(store, [saga], clock=lambda: time.time() + 10)
        assert before_deadline.advance("fulfilment", "1").status == "running"  # its lease holds
    with Later.open(shared_store_url) as store:
        after_deadline = Orchestrator(store, [saga], clock=lambda: time.time() + 31)
        final = after_deadline.advance("fulfilment", "1")
    if attempts == 1:
        assert final.status == "compensated" and final.unknown == ["charge"]
        assert "timed out" in (final.failure or "")
        assert Ledger(ledger).effects() == UNDONE
    else:
        assert final.status == "completed" and final.attempts["charge"] == 2
        assert Ledger(ledger).effects() == ["reserve:1", "charge:1", "ship:1"]


def test_a_step_whose_process_died_in_it_is_compensated_when_the_saga_is_cancelled(
    shared_store_url: str, tmp_path: Path
) -> None:
    """The charge took effect, then its process died; the saga is cancelled. The charge
    may have been done, so it is refunded, but not before its owner's lease lapses."""
    ledger = killed_inside_the_charge(shared_store_url, tmp_path, 1)
    saga = fulfilment(ledger, timeout=30, attempts=1)
    with EventStore.open(shared_store_url) as store:
        assert Orchestrator(store, [saga]).cancel("fulfilment", "1", "order withdrawn")
        within_lease = Orchestrator(store, [saga], clock=lambda: time.time() + 10)
        assert within_lease.advance("fulfilment", "1").status == "compensating"
        assert Ledger(ledger).effects() == ["reserve:1", "charge:1"]  # its owner may be at it
    with Later.open(shared_store_url) as store:
        after_lease = Orchestrator(store, [saga], clock=lambda: time.time() + 31)
        final = after_lease.advance("fulfilment", "1")
    assert Ledger(ledger).effects() == UNDONE
    assert (final.status, final.unknown) == ("compensated", ["charge"])
