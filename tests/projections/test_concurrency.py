"""Projector processes that die or overlap: every event still applied exactly once."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest
from eventcraft.eventstore import EventStore
from eventcraft.projections import ProjectionRunner

from ..processes import PROCESSES
from .models import append_history, applied_table, audit, balances, balances_table, rows
from .workers import project_until, project_until_killed


def wait_for(marker: Path, process: multiprocessing.process.BaseProcess) -> None:
    """Until the worker has written `marker` (it is then hanging mid-batch)."""
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert process.is_alive(), f"the worker died first (exit code {process.exitcode})"
        assert time.monotonic() < deadline, "the worker never reached its trap"
        time.sleep(0.01)


def read_models(runner: ProjectionRunner) -> tuple[list[tuple[object, ...]], ...]:
    """The balances, and the audit without the pid column (a rebuild has its own)."""
    with runner.database.reading() as connection:
        audit_rows = [row[:2] for row in rows(connection, applied_table)]
        return rows(connection, balances_table), audit_rows


def appliers(runner: ProjectionRunner) -> tuple[Counter[int], set[int]]:
    """How often each position was applied, and by which processes."""
    with runner.database.reading() as connection:
        found = rows(connection, applied_table)
    return Counter(int(row[0]) for row in found), {int(row[2]) for row in found}


@pytest.mark.parametrize("traps", [(7, 23, 61)])
@pytest.mark.slow
def test_projectors_killed_mid_batch_leave_a_read_model_equal_to_a_rebuild(
    shared_store_url: str, tmp_path: Path, traps: tuple[int, ...]
) -> None:
    with EventStore.open(shared_store_url) as store:
        last = append_history(store, accounts=5, per_account=16)
    for number, trap in enumerate(traps):
        marker = tmp_path / f"trapped-{number}"
        worker = PROCESSES.Process(
            target=project_until_killed, args=(shared_store_url, trap, str(marker), 10)
        )
        worker.start()
        wait_for(marker, worker)
        os.kill(worker.pid or 0, signal.SIGKILL)
        worker.join()
        assert worker.exitcode == -signal.SIGKILL
    with (
        EventStore.open(shared_store_url) as store,
        ProjectionRunner(store, [audit, balances], lease_ttl=None) as runner,
    ):
        checkpoints = {s.name: s.position for s in runner.status()}
        # The last worker died inside the batch holding its trap: it committed
        # the batches before it and nothing of that one.
        assert checkpoints["audit"] < traps[-1] <= checkpoints["audit"] + 10
        runner.catch_up()
        recovered = read_models(runner)
        applied, _ = appliers(runner)
        runner.rebuild("balances")
        runner.rebuild("audit")
        assert read_models(runner) == recovered
    assert sorted(applied) == list(range(1, last + 1))
    assert set(applied.values()) == {1}


@pytest.mark.parametrize("lease_ttl", [None, 0.5], ids=["no-lease", "lease"])
@pytest.mark.slow
def test_two_projector_processes_never_both_apply_an_event(
    shared_store_url: str, tmp_path: Path, lease_ttl: float | None
) -> None:
    with EventStore.open(shared_store_url) as store:
        last = append_history(store, accounts=4, per_account=40)
        # Create the checkpoints before the race, as a deployed system would have.
        ProjectionRunner(store, [audit, balances]).close()
    marker = tmp_path / "trapped"
    with PROCESSES.Manager() as manager:
        barrier = manager.Barrier(2)
        workers = [
            PROCESSES.Process(
                target=project_until,
                args=(shared_store_url, last, lease_ttl, barrier, last // 3, str(marker)),
            )
            for _ in range(2)
        ]
        for worker in workers:
            worker.start()
        # Whichever gets a third of the way first hangs there, mid-batch: kill it. The
        # other, blocked or refused until then, must finish without applying anything twice.
        deadline = time.monotonic() + 120
        while not marker.exists() or not marker.read_text():
            assert time.monotonic() < deadline, "no worker reached the trap"
            assert any(w.is_alive() for w in workers), "both workers died first"
            time.sleep(0.01)
        killed = int(marker.read_text())
        os.kill(killed, signal.SIGKILL)
        for worker in workers:
            worker.join(timeout=180)
    with (
        EventStore.open(shared_store_url) as store,
        ProjectionRunner(store, [audit, balances]) as runner,
    ):
        applied, _ = appliers(runner)
        with runner.database.reading() as connection:
            by = {int(row[0]): int(row[2]) for row in rows(connection, applied_table)}
        fresh = read_models(runner)[0]
        runner.rebuild("balances")
        assert read_models(runner)[0] == fresh
    assert sorted(applied) == list(range(1, last + 1))
    assert set(applied.values()) == {1}
    # The batch the killed process had in hand was applied once, by the other one.
    assert by[last // 3] != killed
