"""Leases: one runner works a projection at a time."""

from __future__ import annotations

from eventstore import EventStore
from projections import ProjectionRunner
from projections.projector import Projector

from .models import balances


def lone_projector(store: EventStore, runner: ProjectionRunner, owner: str) -> Projector:
    projector = Projector(
        store, runner.database, balances, owner=owner, batch_size=10, lease_ttl=60.0
    )
    projector.setup()
    return projector


def test_a_runner_that_finds_the_lease_taken_keeps_seeing_it_taken(store: EventStore) -> None:
    with ProjectionRunner(store, [balances]) as runner:
        holder = lone_projector(store, runner, "holder")
        other = lone_projector(store, runner, "other")
        assert holder.acquire() is True
        assert [other.acquire(), other.acquire()] == [False, False]
        holder.release()
        assert other.acquire() is True
