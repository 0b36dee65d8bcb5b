"""Leases are timed by the read-model database's clock, not by each process's own: a
process whose clock runs ahead does not find a lease lapsed that its holder keeps, and a
lease taken by one whose clock runs behind lasts its whole length for everyone else."""

from __future__ import annotations

import time
from concurrent.futures import ProcessPoolExecutor

from eventcraft.eventstore import EventStore
from eventcraft.projections import ProjectionRunner

from ..processes import PROCESSES
from .models import balances
from .test_leases import lone_projector

AHEAD = 120.0
"""How far the other process's clock runs ahead: past the whole lease (60 s)."""


def _take_with_a_clock_ahead(url: str) -> bool:
    """In a process of its own whose clock runs AHEAD seconds fast: try to take the lease."""
    real = time.time
    time.time = lambda: real() + AHEAD
    with EventStore.open(url) as store, ProjectionRunner(store, [balances]) as runner:
        return lone_projector(store, runner, "ahead").acquire()


def test_a_process_whose_clock_runs_ahead_does_not_take_a_lease_held(
    shared_store_url: str,
) -> None:
    with EventStore.open(shared_store_url) as store, ProjectionRunner(store, [balances]) as runner:
        holder = lone_projector(store, runner, "holder")
        assert holder.acquire() is True
        with ProcessPoolExecutor(1, mp_context=PROCESSES) as pool:
            assert pool.submit(_take_with_a_clock_ahead, shared_store_url).result() is False
        holder.release()
        with ProcessPoolExecutor(1, mp_context=PROCESSES) as pool:
            assert pool.submit(_take_with_a_clock_ahead, shared_store_url).result() is True


def _hold_with_a_clock_behind(url: str) -> bool:
    """In a process of its own whose clock runs AHEAD seconds slow: take the lease, and
    leave without giving it up (a process that dies holding it)."""
    real = time.time
    time.time = lambda: real() - AHEAD
    with EventStore.open(url) as store, ProjectionRunner(store, [balances]) as runner:
        return lone_projector(store, runner, "behind").acquire()


def test_a_lease_taken_by_a_process_whose_clock_runs_behind_is_not_lapsed_for_others(
    shared_store_url: str,
) -> None:
    # Ended by its own clock, the lease would have lapsed before it was taken, and a
    # second process would run the projection beside the first.
    with ProcessPoolExecutor(1, mp_context=PROCESSES) as pool:
        assert pool.submit(_hold_with_a_clock_behind, shared_store_url).result() is True
    with EventStore.open(shared_store_url) as store, ProjectionRunner(store, [balances]) as runner:
        assert lone_projector(store, runner, "honest").acquire() is False
