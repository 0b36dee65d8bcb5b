# Generated from eventstore/postgres/async_standby.py by scripts/async_to_sync.py: do not edit.
# Edit eventstore/postgres/async_standby.py, then run `make generate`.
"""Where a PostgreSQL store with a read replica reads: the standby, judged by `replicas.py`,
with the primary asked only for its mark and for the reads that follow the store's own
writes.

Read your writes. A standby replays the primary's WAL some time after it was written,
so a caller that has just appended (or deleted a stream, or saved a snapshot) through
this store could read the standby before the write shows there. So the store counts its
writes; the first read after any asks the primary for its WAL insert position (taken
after those writes committed, so past their commit records) and waits until the standby
has replayed it, at most `READ_YOUR_WRITES_WAIT` seconds, and reads from the primary when
it has not (replay paused, or far behind). Reads that follow no write of this store go
to the standby at once: they see the log as the standby has it, never an event the
primary may yet place below (the high-water mark's rule), and never one out of order.

"""

from __future__ import annotations

import threading
import time
from functools import partial
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from .. import telemetry
from ..errors import StoreUnavailable
from ..log_status import ReplicaLag
from . import high_water
from .connections import ConnectionPool
from .listener import RECHECK
from .replicas import PrimaryMark, primary_mark, standby_head
from .target import PostgresTarget

READ_YOUR_WRITES_WAIT = 2.0
"""The longest a read after the store's own write waits for the standby to replay it, in
seconds, before reading from the primary instead."""

DOWN_PAUSE = 5.0
"""How long reads go to the primary after the standby could not be reached, in seconds,
before the standby is tried again."""

_FIRST_PAUSE, _LONGEST_PAUSE = 0.001, 0.05

Conn = psycopg.Connection[Any]

_INSERTED = "SELECT pg_current_wal_insert_lsn()::text"
_REPLAYED = "SELECT coalesce(pg_last_wal_replay_lsn() >= %s::pg_lsn, true)"
_STANDBY = """
SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()::text END,
       CASE WHEN pg_is_in_recovery() THEN pg_get_wal_replay_pause_state() <> 'not paused'
            ELSE false END
"""
_BEHIND = "SELECT greatest(pg_wal_lsn_diff(pg_current_wal_insert_lsn(), %s::pg_lsn), 0)"


class ReplicaReads:
    """The standby's pool, and the primary's for what only the primary can tell."""

    def __init__(self, replica: PostgresTarget, primary: ConnectionPool) -> None:
        self.pool = ConnectionPool(replica)
        where = conninfo_to_dict(replica.conninfo)
        self.name = f"{where.get('host', '')}:{where.get('port', '5432')}/{where.get('dbname', '')}"
        """The replica in telemetry: host:port/database."""
        self._primary = primary
        self._writes = 0
        self._synced = 0
        self._counting = threading.Lock()  # held for an increment: never across a wait
        self._down_until = 0.0

    def wrote(self) -> None:
        """Count a write of this store: the next read waits until the standby shows it."""
        with self._counting:
            self._writes += 1

    def failed(self) -> None:
        """The standby could not be reached: reads go to the primary for `DOWN_PAUSE`."""
        self._down_until = time.monotonic() + DOWN_PAUSE

    def reader(self) -> ConnectionPool:
        """The pool the next read runs on: the standby's, once it shows the store's writes;
        the primary's if it does not within `READ_YOUR_WRITES_WAIT`, or could not be
        reached a moment ago."""
        if time.monotonic() < self._down_until:
            return self._primary
        writes = self._writes
        if writes == self._synced:
            return self.pool
        try:
            lsn = self._primary.run(_inserted)
        except (psycopg.OperationalError, StoreUnavailable):
            return self.pool  # the primary is gone (promoted standby?): read what is here
        try:
            replayed = self._replay(lsn, READ_YOUR_WRITES_WAIT)
        except (psycopg.OperationalError, StoreUnavailable):
            self.failed()
            return self._primary
        if not replayed:
            return self._primary
        with self._counting:
            self._synced = max(self._synced, writes)
        return self.pool

    def replayed_past(self, after: int) -> bool:
        """Whether the primary's log has moved past `after` and the standby has replayed
        that far, waited for up to `RECHECK` seconds: a waiter woken by an append's
        NOTIFY (sent by the primary) reads the standby once it shows the append."""
        judged = self._primary_mark(after)
        if judged is None or judged[0] <= after:
            return False
        try:
            return self._replay(judged[1], RECHECK)
        except (psycopg.OperationalError, StoreUnavailable):
            self.failed()  # the next look reads the primary
            return True

    def _replay(self, lsn: str, wait: float) -> bool:
        """Whether the standby has replayed up to `lsn`, waited for up to `wait` seconds."""
        deadline = time.monotonic() + wait
        pause = _FIRST_PAUSE
        while not self.pool.run(partial(_replayed, lsn)):
            if time.monotonic() >= deadline:
                return False
            time.sleep(pause)
            pause = min(pause * 2, _LONGEST_PAUSE)
        return True

    def head(self, conn: Conn, after: int) -> int:
        """The high-water mark above `after` on `conn`, a connection to the standby (or, for
        a read that went to the primary, to it: the same rule holds there). When the
        primary was asked, how far the standby is behind it goes to telemetry."""
        asked: list[int] = []

        def primary(after: int) -> PrimaryMark | None:
            judged = self._primary_mark(after)
            if judged is not None:
                asked.append(judged[0])
            return judged

        head = standby_head(conn, after, primary)
        if asked:
            telemetry.replica_lag(self.name, max(0, asked[0] - head))
        return head

    def lag(self) -> ReplicaLag:
        """How far the standby is behind the primary."""
        replayed, paused = self.pool.run(_standby)
        standby_mark = self.pool.run(partial(standby_head, after=0, primary=_none))
        if replayed is None:  # promoted: a primary of its own, behind nothing
            return ReplicaLag(standby_mark, events=0, bytes=0, paused=False, promoted=True)
        primary_mark, behind = self._primary.run(partial(_behind, replayed))
        events = max(0, primary_mark - standby_mark)
        telemetry.replica_lag(self.name, events, behind)
        return ReplicaLag(standby_mark, events, behind, paused=paused, promoted=False)

    def _primary_mark(self, after: int) -> PrimaryMark | None:
        try:
            return self._primary.run(partial(primary_mark, after=after))
        except (psycopg.OperationalError, StoreUnavailable):
            return None  # the standby's own mark, sound alone, until the primary answers

    def close(self) -> None:
        self.pool.close()


def _none(after: int) -> PrimaryMark | None:
    return None


def _inserted(conn: Conn) -> str:
    row = (conn.execute(_INSERTED)).fetchone()
    assert row is not None
    return str(row[0])


def _replayed(lsn: str, conn: Conn) -> bool:
    row = (conn.execute(_REPLAYED, (lsn,))).fetchone()
    return bool(row and row[0])


def _standby(conn: Conn) -> tuple[str | None, bool]:
    row = (conn.execute(_STANDBY)).fetchone()
    assert row is not None
    return (None if row[0] is None else str(row[0])), bool(row[1])


def _behind(replayed: str, conn: Conn) -> tuple[int, int]:
    mark = high_water.safe_head(conn, 0)
    row = (conn.execute(_BEHIND, (replayed,))).fetchone()
    return mark, int(row[0]) if row else 0
