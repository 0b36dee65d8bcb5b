"""Where the global log stands, and what holds it back: for operators and their tools."""

from __future__ import annotations

from typing import NamedTuple


class HeldPosition(NamedTuple):
    """A position readers wait at because the append that drew it is still running.

    Only PostgreSQL holds one: what an operator's alert looks at.

    Example::

        from eventcraft.eventstore import EventStore, HeldPosition, LogStatus

        def held_too_long(status: LogStatus, seconds: float = 30.0) -> str | None:
            held = status.held
            if held is None or held.seconds < seconds:
                return None
            return f"readers wait at {held.position} for backend {held.pid} ({held.seconds:.0f} s)"

        stuck = LogStatus(head=12, high_water_mark=9, held=HeldPosition(10, 4242, 95.0))
        assert held_too_long(stuck) == "readers wait at 10 for backend 4242 (95 s)"
        with EventStore.open("sqlite:///shop.db") as store:
            assert held_too_long(store.log_status()) is None
    """

    position: int
    """The first position past the high-water mark: drawn, neither committed nor rolled back."""
    pid: int | None
    """The PostgreSQL backend running the oldest such append (`pg_stat_activity.pid`); None
    for a prepared transaction, or an append that ended a moment ago."""
    seconds: float
    """How long that transaction has been open, in seconds."""


class ReplicaLag(NamedTuple):
    """How far a store's read replica (a PostgreSQL hot standby) is behind its primary.

    A store opened with a replica reads the log there: its readers go up to
    `high_water_mark`, `events` short of the primary's.

    Example::

        from eventcraft.eventstore import LogStatus, ReplicaLag

        lag = ReplicaLag(high_water_mark=90, events=10, bytes=8192, paused=False, promoted=False)
        status = LogStatus(head=100, high_water_mark=100, held=None, replica=lag)
        assert status.replica is not None and status.replica.events == 10
        assert LogStatus(head=3, high_water_mark=3, held=None).replica is None
    """

    high_water_mark: int
    """The high-water mark on the replica: how far the store's readers read now."""
    events: int
    """Positions between it and the primary's high-water mark: what readers wait for."""
    bytes: int
    """WAL the primary has written and the replica has not replayed, in bytes."""
    paused: bool
    """Whether the replica's replay is paused (`pg_wal_replay_pause()`)."""
    promoted: bool
    """Whether the replica has been promoted: a primary of its own, behind nothing."""


class LogStatus(NamedTuple):
    """The log's head, how far readers may read, and why not further.

    On SQLite and in memory positions are committed in order: `head` and
    `high_water_mark` are always equal and nothing is ever held.

    Example::

        from eventcraft.eventstore import EventStore, LogStatus, NewEvent

        with EventStore.open("sqlite:///shop.db") as store:
            store.append("order-1", [NewEvent("OrderPlaced", {"cents": 1250})])
            status = store.log_status()
        assert status == LogStatus(head=1, high_water_mark=1, held=None)
    """

    head: int
    """The highest committed position."""
    high_water_mark: int
    """The position up to which the log can no longer change: what readers read up to."""
    held: HeldPosition | None
    """What keeps the high-water mark below the head, when it is."""
    replica: ReplicaLag | None = None
    """How far the store's read replica is behind, for a store opened with one (the other
    fields are then the primary's)."""
