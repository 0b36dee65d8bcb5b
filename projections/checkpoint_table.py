"""A checkpoint kept beside the runners', in the caller's own transactions.

A process that follows the log by itself (the messaging relay does) keeps its
checkpoint, its lease and the events it set aside where the runners keep
theirs: a row of `eventcraft_projections` and entries of the error store, in
the read-model database. `CheckpointTable` reaches those rows through the
connection of a transaction the caller holds, so that it can read its
checkpoint locked, do its work and move the checkpoint in one transaction, as
a runner's batch does (`projector.py`). Each method runs the runners' own
statements (`checkpoint.py`, `parking.py`, `schema.py`): there is one way to
write these rows.
"""

from __future__ import annotations

import sqlalchemy as sa
from eventcraft.eventstore import RecordedEvent

from . import checkpoint, parking, schema
from .checkpoint import Checkpoint
from .parking import ParkedEvent

_FIRST_GENERATION = 1
"""A checkpoint kept outside a runner serves no tables; its row says generation 1, as a
new projection's does."""


class CheckpointTable:
    """The read-model database's checkpoints, their leases and their parked events,
    through the connection of a transaction the caller holds.

    A process that follows the log by itself keeps its place here as a projection
    does: it reads its checkpoint with `lock=True`, checks that the position is where
    its work began and the lease is its own, and advances the checkpoint in the same
    transaction, which commits or rolls back with whatever else it wrote. Leases are
    timed by the database's clock, so that hosts whose clocks differ agree on when one
    lapses; reckon when to renew yours with `lease_deadline`.

    Example::

        from eventcraft.eventstore import EventStore
        from eventcraft.projections import CheckpointTable, Database

        store = EventStore.open("sqlite:///shop.db")
        database = Database.of(None, store)  # the store's own database
        with database.transaction() as connection:
            table = CheckpointTable(connection)
            table.create()
            table.start("orders-out")
        with database.transaction() as connection:
            table = CheckpointTable(connection)
            assert table.acquire_lease("orders-out", "worker-1", ttl=10.0)
            row = table.read("orders-out", lock=True)  # held until the commit
            assert row is not None and row.owner == "worker-1" and row.position == 0
            table.advance("orders-out", 42)  # with the work done up to 42
        with database.reading() as connection:
            row = CheckpointTable(connection).read("orders-out")
        assert row is not None and row.position == 42
    """

    def __init__(self, connection: sa.Connection) -> None:
        self.connection = connection
        """The transaction's connection: every statement runs, and commits, in it."""

    def create(self) -> None:
        """Create the checkpoint table and the error store where they are missing, and
        bring an older release's up to date. Safe from several processes at once."""
        schema.create(self.connection)

    def read(self, name: str, *, lock: bool = False) -> Checkpoint | None:
        """The checkpoint `name`, None if it was never started. With `lock`, its row is
        held until the transaction ends: no other process moves it or takes its lease
        meanwhile."""
        return checkpoint.read(self.connection, name, lock=lock)

    def start(self, name: str) -> Checkpoint:
        """The checkpoint `name`, started at position 0 without a lease if it was
        missing; its row is held until the transaction ends. Of two processes starting
        it at once, the second waits for the first and finds its row."""
        row = checkpoint.read(self.connection, name, lock=True)
        if row is not None:
            return row
        # No row to lock: the lock a runner takes to set up a new projection lets one
        # transaction at a time past here, and the next finds the row made.
        checkpoint.lock_new(self.connection, name)
        row = checkpoint.read(self.connection, name, lock=True)
        if row is None:
            checkpoint.insert(self.connection, name, _FIRST_GENERATION)
            row = checkpoint.read(self.connection, name, lock=True)
            assert row is not None, "inserted in this transaction"
        return row

    def advance(self, name: str, position: int, *, lease_ttl: float | None = None) -> None:
        """Move the checkpoint `name` to `position`; with `lease_ttl`, renew its lease for
        that many seconds from now too. Fence it first: read the row with `lock=True` in
        this transaction and check its position and owner."""
        checkpoint.advance(self.connection, name, position, lease_ttl=lease_ttl)

    def acquire_lease(self, name: str, owner: str, ttl: float) -> bool:
        """Take the lease of `name` for `owner` until `ttl` seconds from now, if it is
        free, lapsed or `owner`'s already (then it is renewed); True if `owner` holds it
        now. One statement: of two processes asking at once, one gets it."""
        return checkpoint.acquire_lease(self.connection, name, owner, ttl)

    def release_lease(self, name: str, owner: str) -> None:
        """Give back `owner`'s lease of `name`, so that another process may take it at
        once; a lease another process holds now is left alone."""
        checkpoint.release_lease(self.connection, name, owner)

    def parked(self, name: str) -> list[ParkedEvent]:
        """The events parked under `name`, in position order."""
        return parking.listed(self.connection, name)

    def park(
        self, name: str, event: RecordedEvent, error: BaseException, *, attempts: int = 1
    ) -> None:
        """Set `event` aside under `name`, with `error` (its type and message, and a
        traceback without messages) and how many times it was tried; it replaces an
        entry of the same event. The checkpoint does not move: advance it past the event
        to go on."""
        parking.park(self.connection, name, event, error, attempts)
