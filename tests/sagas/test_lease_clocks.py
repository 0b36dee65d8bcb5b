"""A step's lease is timed by the store's database, as every other lease is: an
orchestrator whose clock runs ahead does not find a lease lapsed that its holder keeps,
and takes over one that has lapsed by the database's time, whatever its own clock says."""

from __future__ import annotations

import threading
import time
from typing import Any

from eventcraft.eventstore import EventStore
from eventcraft.sagas import Orchestrator, Saga, Step, StepContext

from .later import LATER, Later

AHEAD = 120.0
"""How far the second orchestrator's clock runs ahead: past the whole lease."""
LEASE = 60.0
assert LATER > LEASE


class Slow:
    """A step whose first try holds until the test lets it go; later tries return at once."""

    def __init__(self) -> None:
        self.tries: list[str] = []
        self.under_way = threading.Event()
        self.go_on = threading.Event()

    def __call__(self, data: dict[str, Any], context: StepContext) -> dict[str, str]:
        self.tries.append(f"{context.step}:{context.attempt}")
        if len(self.tries) == 1:
            self.under_way.set()
            assert self.go_on.wait(60), "the test never let the first try go on"
        return {}

    def saga(self) -> Saga:
        return Saga("slow", [Step("work", self)])


def _ahead() -> float:
    return time.time() + AHEAD


def _behind() -> float:
    return time.time() - AHEAD


def test_an_orchestrator_whose_clock_runs_ahead_does_not_take_a_step_whose_lease_is_held(
    shared_store_url: str,
) -> None:
    slow = Slow()
    saga = slow.saga()
    with EventStore.open(shared_store_url) as one, EventStore.open(shared_store_url) as two:
        holder = Orchestrator(one, [saga], lease=LEASE, owner="holder")
        ahead = Orchestrator(two, [saga], lease=LEASE, owner="ahead", clock=_ahead)
        holder.start(saga, {}, saga_id="1")
        running = threading.Thread(target=holder.run_pending)
        running.start()
        try:
            assert slow.under_way.wait(60)
            assert ahead.run_pending() == 1  # left to its holder
            assert slow.tries == ["work:1"]
            flight = ahead.state("slow", "1").in_flight
            assert flight is not None and flight.owner == "holder"
        finally:
            slow.go_on.set()
            running.join(60)
        assert ahead.state("slow", "1").status == "completed"
        assert slow.tries == ["work:1"]


def test_an_orchestrator_whose_clock_runs_behind_takes_over_a_lease_lapsed_by_the_databases(
    shared_store_url: str,
) -> None:
    slow = Slow()
    saga = slow.saga()
    with EventStore.open(shared_store_url) as one, Later.open(shared_store_url) as two:
        holder = Orchestrator(one, [saga], lease=LEASE, owner="holder")
        behind = Orchestrator(two, [saga], lease=LEASE, owner="behind", clock=_behind)
        holder.start(saga, {}, saga_id="1")
        running = threading.Thread(target=holder.run_pending)
        running.start()
        try:
            assert slow.under_way.wait(60)
            assert behind.run_pending() == 0  # the holder presumed dead, its try retried
            assert slow.tries == ["work:1", "work:2"]
        finally:
            slow.go_on.set()
            running.join(60)
        done = behind.state("slow", "1")
        assert (done.status, done.attempts["work"]) == ("completed", 2)
