"""The read-model database's clock, which every lease and claim is timed by.

A lease is written by one process and judged by others, often on other
hosts, whose clocks may be seconds apart: judged by its own clock, a
process running ahead would find a lease lapsed that its holder keeps, and
two would work a projection at once. So a lease's end is computed and
compared in the database's time (`now`), in the statement that takes,
renews or checks it. A process keeps its own reckoning of when to renew on
its monotonic clock (`local_deadline`), counted from before the statement
that set the lease, and so never later than the end the database holds.
"""

from __future__ import annotations

import time

import sqlalchemy as sa

_JULIAN_EPOCH = 2440587.5
"""The Julian day of 1970-01-01T00:00Z: SQLite's `julianday` counts from noon, 4713 BC."""


def now(connection: sa.Connection) -> sa.ColumnElement[float]:
    """The database's time, in seconds since the epoch, as an expression of a statement."""
    if connection.dialect.name == "postgresql":
        # clock_timestamp, not now(): the time of the statement, not of its transaction.
        return sa.cast(sa.extract("epoch", sa.func.clock_timestamp()), sa.Float)
    return (sa.func.julianday(sa.literal_column("'now'")) - _JULIAN_EPOCH) * 86400.0


def read_now(connection: sa.Connection) -> float:
    """The database's time, read: for showing whether a lease read with it still holds."""
    return float(connection.execute(sa.select(now(connection))).scalar_one())


def local_deadline(ttl: float) -> float:
    """When a lease taken by a statement sent after this call lapses, on this process's
    monotonic clock (compare with `time.monotonic()`).

    Reckoned before the statement, it is never later than the end the database holds,
    however far this host's clock is from the database's: renew the lease by then (at
    half of it, say), and it never lapses while you believe it held.

    Example::

        import time

        from eventcraft.eventstore import EventStore
        from eventcraft.projections import CheckpointTable, Database, lease_deadline

        store = EventStore.open("sqlite:///shop.db")
        deadline = lease_deadline(10.0)  # before the statement that takes the lease
        with Database.of(None, store).transaction() as connection:
            table = CheckpointTable(connection)
            table.create()
            table.start("orders-out")
            held = table.acquire_lease("orders-out", "worker-1", ttl=10.0)
        assert held and 0 < deadline - time.monotonic() <= 10.0
        renewal_due = time.monotonic() > deadline - 10.0 / 2  # half of it has passed
        assert not renewal_due
    """
    return time.monotonic() + ttl
