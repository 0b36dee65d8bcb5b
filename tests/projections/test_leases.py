"""Leases: one runner works a projection at a time."""

from __future__ import annotations

from eventcraft.eventstore import EventStore
from eventcraft.projections import ProjectionRunner
from eventcraft.projections.projector import Projector

from .models import append_history, balances, balances_table, rows


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


def test_without_leases_a_runner_counts_the_batches_another_applied_first(
    store: EventStore,
) -> None:
    append_history(store, accounts=2, per_account=5)
    with (
        ProjectionRunner(store, [balances], lease_ttl=None) as first,
        ProjectionRunner(store, [balances], lease_ttl=None) as second,
    ):
        first.catch_up()  # the second still believes the projection is at position 0
        with first.database.reading() as connection:
            before = rows(connection, balances_table)
        second.catch_up()
        with second.database.reading() as connection:
            assert rows(connection, balances_table) == before  # nothing applied twice
        assert first.fenced() == {"balances": 0}
        assert second.fenced() == {"balances": 1}
