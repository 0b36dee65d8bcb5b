"""Checkpoints and leases: the row each projection keeps in `eventcraft_projections`.

A lease's end is the database's time plus the lease's length, written and compared in
the database's time (`clock.py`)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa

from . import clock
from .database import Database
from .schema import checkpoints as table


@dataclass(frozen=True)
class Checkpoint:
    """Where a projection, or another follower of the log, stands: a row of the
    checkpoint table (`CheckpointTable`), with its lease.

    Example::

        from eventcraft.eventstore import EventStore
        from eventcraft.projections import CheckpointTable, Database

        store = EventStore.open("sqlite:///shop.db")
        with Database.of(None, store).transaction() as connection:
            table = CheckpointTable(connection)
            table.create()
            checkpoint = table.start("orders-out")
        assert checkpoint.name == "orders-out" and checkpoint.position == 0
        assert checkpoint.owner is None  # nobody holds its lease
    """

    name: str
    """The projection's name (or the relay's, or a partition's share of either)."""
    position: int
    """Every event of the log up to here has been applied, and none after."""
    generation: int
    """The generation of tables that serves queries."""
    next_generation: int
    """The generation the next rebuild fills."""
    owner: str | None
    """The runner holding the lease, if any."""
    lease_until: float | None
    """When the lease lapses unless renewed (seconds since the epoch, the database's)."""
    updated_at: float
    """When the row last changed (seconds since the epoch, the writer's clock)."""


def read(connection: sa.Connection, name: str, *, lock: bool = False) -> Checkpoint | None:
    """The projection's row; with `lock`, held until the transaction ends."""
    query = sa.select(table).where(table.c.name == name)
    if lock:
        query = query.with_for_update()
    row = connection.execute(query).one_or_none()
    return None if row is None else Checkpoint(*row)


def read_many(connection: sa.Connection, names: list[str]) -> dict[str, Checkpoint]:
    rows = connection.execute(sa.select(table).where(table.c.name.in_(names)))
    return {row.name: Checkpoint(*row) for row in rows}


def checkpoint_positions(database: Database, names: Sequence[str]) -> dict[str, int] | None:
    """The position of each of the projections `names` that has a checkpoint in
    `database`, by name; None if no runner has set the database up (it holds no
    checkpoints). Reads only: nothing is created where nothing ran.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections import (
            Database, ProjectionRunner, Subscription, checkpoint_positions,
        )

        store = EventStore.open("sqlite:///shop.db")
        database = Database.of(None, store)  # the store's own database, as a runner's default
        assert checkpoint_positions(database, ["receipts"]) is None  # no runner set it up yet
        store.append("order-1", [NewEvent("OrderPaid", {"cents": 900})])
        with ProjectionRunner(store, [Subscription("receipts", lambda event: None)]) as runner:
            runner.catch_up()
        assert checkpoint_positions(database, ["receipts", "invoices"]) == {"receipts": 1}
        database.close()
        store.close()
    """
    with database.reading() as connection:
        if not sa.inspect(connection).has_table(table.name):
            return None
        rows = read_many(connection, list(names)) if names else {}
    return {name: row.position for name, row in sorted(rows.items())}


def checkpoint_leases(
    database: Database, names: Sequence[str]
) -> dict[str, tuple[int, str | None]]:
    """Where each of the checkpoints `names` that exists in `database` stands, and who
    holds its lease: (position, owner) by name, the owner None unless its lease is current
    by the database's clock (`clock.py`). Empty where no runner has set the database up.
    Reads only: nothing is created where nothing ran.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections import ProjectionRunner, Subscription, checkpoint_leases

        store = EventStore.open("sqlite:///shop.db")
        store.append("order-1", [NewEvent("OrderPaid", {"cents": 900})])
        with ProjectionRunner(store, [Subscription("receipts", lambda event: None)]) as runner:
            runner.start()
            runner.wait_until(1)  # the runner's thread holds the lease while it follows
            leases = checkpoint_leases(runner.database, ["receipts"])  # (position, lease holder)
            assert leases == {"receipts": (1, runner.owner)}
            runner.stop()  # gives the lease back
            assert checkpoint_leases(runner.database, ["receipts"]) == {"receipts": (1, None)}
        store.close()
    """
    with database.reading() as connection:
        if not names or not sa.inspect(connection).has_table(table.name):
            return {}
        rows = read_many(connection, list(names))
        now = clock.read_now(connection)  # the time the leases are kept in
    return {
        name: (row.position, row.owner if (row.lease_until or 0.0) > now else None)
        for name, row in sorted(rows.items())
    }


def lock_new(connection: sa.Connection, name: str) -> None:
    """Hold off, until this transaction ends, every other transaction that would start
    the checkpoint `name`. On PostgreSQL two that both find no row to lock would both
    insert one, and the second fail on the table's key; on SQLite every transaction
    that writes holds the database's write lock already."""
    if connection.dialect.name == "postgresql":
        connection.execute(
            sa.text("SELECT pg_advisory_xact_lock(hashtext(:key))"),
            {"key": f"eventcraft-projection:{name}"},
        )


def insert(connection: sa.Connection, name: str, generation: int) -> None:
    connection.execute(
        sa.insert(table).values(
            name=name,
            position=0,
            generation=generation,
            next_generation=generation + 1,
            owner=None,
            lease_until=None,
            updated_at=time.time(),
        )
    )


def advance(
    connection: sa.Connection, name: str, position: int, *, lease_ttl: float | None = None
) -> None:
    """Move the checkpoint to `position`; with `lease_ttl`, renew the lease for that long."""
    values: dict[str, object] = {"position": position, "updated_at": time.time()}
    if lease_ttl is not None:
        values["lease_until"] = clock.now(connection) + lease_ttl
    connection.execute(sa.update(table).where(table.c.name == name).values(**values))


def serve(connection: sa.Connection, name: str, generation: int, position: int) -> None:
    connection.execute(
        sa.update(table)
        .where(table.c.name == name)
        .values(generation=generation, position=position, updated_at=time.time())
    )


def claim_generation(connection: sa.Connection, name: str) -> int:
    """A generation number no other rebuild of `name` will use."""
    row = read(connection, name, lock=True)
    assert row is not None, "the runner creates the row before any rebuild"
    connection.execute(
        sa.update(table).where(table.c.name == name).values(next_generation=row.next_generation + 1)
    )
    return row.next_generation


def acquire_lease(connection: sa.Connection, name: str, owner: str, ttl: float) -> bool:
    """Take or renew the lease if it is free, lapsed or ours; True if we hold it now."""
    now = clock.now(connection)
    taken = connection.execute(
        sa.update(table)
        .where(
            table.c.name == name,
            sa.or_(
                table.c.owner.is_(None),
                table.c.owner == owner,
                table.c.lease_until < now,
            ),
        )
        .values(owner=owner, lease_until=now + ttl)
    )
    return taken.rowcount == 1


def release_lease(connection: sa.Connection, name: str, owner: str) -> None:
    connection.execute(
        sa.update(table)
        .where(table.c.name == name, table.c.owner == owner)
        .values(owner=None, lease_until=None)
    )


def renew_lease(connection: sa.Connection, name: str, owner: str, ttl: float) -> bool:
    """Extend `owner`'s lease by `ttl` from now, checkpoint untouched; False if it is not
    theirs.

    A lease that lapsed with nobody taking it is still the owner's to renew: no other
    process has worked the projection meanwhile.
    """
    renewed = connection.execute(
        sa.update(table)
        .where(table.c.name == name, table.c.owner == owner)
        .values(lease_until=clock.now(connection) + ttl)
    )
    return renewed.rowcount == 1
