"""Kill the orchestrator (SIGKILL) at every transition: a restarted one finishes the saga,
and each service's effect is applied once."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from pathlib import Path

import pytest

from eventstore import EventStore
from sagas import Orchestrator

from .services import Ledger, fulfilment
from .workers import run_and_crash, run_until_hung

SPAWN = multiprocessing.get_context("spawn")
HAPPY = ["reserve:1", "charge:1", "ship:1"]
UNDONE = ["reserve:1", "charge:1", "refund:1", "release:1"]
# Transitions recorded on each path (appends to the saga's stream), counted by running it.
HAPPY_APPENDS = 8  # started, 3 x (step started, succeeded), completed
FAILING_APPENDS = 13  # started, 2 x 2 steps, ship started/failed twice, 2 x 2 compensations, end


def crash_then_recover(
    url: str, ledger: Path, fail: str | None, crash_after: int, crash_in: str | None
) -> str:
    worker = SPAWN.Process(
        target=run_and_crash, args=(url, str(ledger), fail, crash_after, crash_in)
    )
    worker.start()
    worker.join(120)
    assert worker.exitcode == -signal.SIGKILL, f"the worker was meant to die, not {worker.exitcode}"
    with EventStore.open(url) as store:
        # The dead owner's lease lapses: a clock 60 s ahead says so without waiting.
        recovering = Orchestrator(
            store, [fulfilment(ledger, fail=fail)], clock=lambda: time.time() + 60
        )
        assert recovering.run_pending() == 0
        return recovering.state("fulfilment", "1").status


@pytest.mark.parametrize("crash_after", range(1, HAPPY_APPENDS))
def test_a_crash_after_any_transition_still_completes_each_step_once(
    shared_store_url: str, tmp_path: Path, crash_after: int
) -> None:
    ledger = tmp_path / "ledger"
    status = crash_then_recover(shared_store_url, ledger, None, crash_after, None)
    assert status == "completed"
    assert Ledger(ledger).effects() == HAPPY


@pytest.mark.parametrize("crash_after", range(1, FAILING_APPENDS))
def test_a_crash_after_any_transition_of_a_failing_saga_still_compensates_once(
    shared_store_url: str, tmp_path: Path, crash_after: int
) -> None:
    ledger = tmp_path / "ledger"
    status = crash_then_recover(shared_store_url, ledger, "ship", crash_after, None)
    assert status == "compensated"
    assert Ledger(ledger).effects() == UNDONE


@pytest.mark.parametrize(
    ("fail", "crash_in"),
    [(None, "reserve"), (None, "charge"), (None, "ship"), ("ship", "refund"), ("ship", "release")],
)
def test_a_step_done_but_not_recorded_is_retried_with_its_key_and_takes_effect_once(
    shared_store_url: str, tmp_path: Path, fail: str | None, crash_in: str
) -> None:
    ledger = tmp_path / "ledger"
    status = crash_then_recover(shared_store_url, ledger, fail, 0, crash_in)
    assert status == ("completed" if fail is None else "compensated")
    assert Ledger(ledger).effects() == (HAPPY if fail is None else UNDONE)


def test_a_step_that_hangs_when_its_process_dies_times_out_after_the_restart(
    shared_store_url: str, tmp_path: Path
) -> None:
    """The deadline is in the stream: the next orchestrator fails the step once it passes,
    and compensates it with the others, since it may have taken effect (it did)."""
    ledger = tmp_path / "ledger"
    worker = SPAWN.Process(
        target=run_until_hung, args=(shared_store_url, str(ledger), "charge", 30)
    )
    worker.start()
    deadline = time.monotonic() + 120
    while not (tmp_path / "hanging").exists():
        assert worker.is_alive() and time.monotonic() < deadline, "the worker never hung"
        time.sleep(0.01)
    os.kill(worker.pid or 0, signal.SIGKILL)
    worker.join()
    with EventStore.open(shared_store_url) as store:
        saga = fulfilment(ledger, timeout=30)
        before_deadline = Orchestrator(store, [saga], clock=lambda: time.time() + 10)
        assert before_deadline.advance("fulfilment", "1").status == "running"  # its lease holds
        after_deadline = Orchestrator(store, [saga], clock=lambda: time.time() + 31)
        final = after_deadline.advance("fulfilment", "1")
    assert final.status == "compensated" and final.unknown == ["charge"]
    assert "timed out" in (final.failure or "")
    assert Ledger(ledger).effects() == UNDONE
