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


def test_catch_up_stops_at_a_lease_taken_from_it_rather_than_reading_on(
    store: EventStore,
) -> None:
    """It reads no batch after the one the fence refused: the lease's holder works on. It
    read and refused batch after batch instead, for as long as the holder had not moved
    the checkpoint (for ever, here)."""
    import threading
    import time

    import sqlalchemy as sa
    from eventcraft.projections.schema import checkpoints

    append_history(store, accounts=2, per_account=5)
    with ProjectionRunner(store, [balances]) as runner:
        projector = runner._projectors["balances"]
        assert projector.acquire()
        with runner.database.transaction() as connection:  # another runner takes it early
            connection.execute(
                sa.update(checkpoints)
                .where(checkpoints.c.name == "balances")
                .values(owner="thief", lease_until=time.time() + 60)
            )
        caught_up = threading.Thread(target=runner.catch_up, daemon=True)
        caught_up.start()
        caught_up.join(10)
        assert not caught_up.is_alive(), "catch_up kept reading batches the fence refused"
        assert runner.fenced() == {"balances": 1}
        with runner.database.reading() as connection:
            assert rows(connection, balances_table) == []
