"""The high-water mark on PostgreSQL: the ordering rule of `schema.py` in SQL.

Two statements with one body. `_COARSE` bounds the writers that may still
fill a gap by the snapshot's xmin, the oldest transaction running anywhere on
the server: an index probe or two, and all a read pays while the log has no
gap, or only gaps whose writers have ended. When it stops short of a
committed row (at a gap, or after walking `WALK` rows past the horizon),
`_PRECISE` judges again by the transactions that hold the store's append lock
(`schema.LOG_LOCK_KEY`), so that a transaction elsewhere on the server never
holds readers back, however much is appended while it runs. Each statement is
sound on its own; the second only passes more.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

import psycopg

from ..encoding import MAX_INT
from ..log_status import HeldPosition, LogStatus
from ..sql import schema

WALK = 1_000
"""Most rows a statement of the high-water mark looks at past `after`, in each of its two
walks: down from the top for the last settled row, and up from it while positions run
on. Either bound reached, the statement stops short of a committed row, and the
precise rule, whose horizon a transaction elsewhere on the server does not hold back,
judges again: so a statement's cost is bounded, never by what was appended since the
oldest transaction on the server began."""

PRECISE_TRIES = 2
"""Statements of the precise rule a read runs before it stops short of a committed row.

The rule counts as a blocker every transaction the snapshot lists as running that
has ended by the time the lock table is read, as nobody can tell any more whether
it was a writer. On a busy server some transaction nearly always ends in that
moment; a second statement, with a snapshot of its own, no longer lists it, while
a writer still running stops it again."""

E = schema.EVENTS
_MASK = 4294967295

# Transactions that hold the store's append lock, as the lock manager has
# them when the statement reads it: after the statement's snapshot was taken.
_LOCKS = f"""
locks AS MATERIALIZED (
    SELECT l.locktype, l.virtualtransaction, l.pid, l.transactionid::text::bigint AS xid
    FROM pg_locks l
    WHERE l.granted AND (
        l.locktype = 'transactionid'
        OR (l.locktype = 'advisory'
            AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
            AND l.classid = {schema.LOG_LOCK_TAG}
            AND l.objid = '{E}'::regclass::oid
            AND l.objsubid = 1)
    )
), running AS (
    SELECT xid, virtualtransaction FROM locks WHERE locktype = 'transactionid'
), writers AS (
    SELECT r.xid, l.pid FROM running r
    JOIN locks l ON l.locktype = 'advisory' AND l.virtualtransaction = r.virtualtransaction
)"""

# The oldest xid that may still fill a gap, as one row `xid` (64 bits).
_COARSE_HORIZON = """
horizon AS (
    SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS xid
)"""
# The snapshot's running xids that hold the append lock now, or have ended
# since the snapshot (writers or not, nobody can tell any more); none: xmax.
_PRECISE_HORIZON = f"""{_LOCKS}, snap AS (
    SELECT pg_current_snapshot() AS s
), blockers AS (
    SELECT x::text::bigint AS xid FROM snap, pg_snapshot_xip(snap.s) AS x
), horizon AS (
    SELECT coalesce(
        (SELECT min(b.xid) FROM blockers b
         WHERE (b.xid & {_MASK}) IN (SELECT xid FROM writers)
            OR (b.xid & {_MASK}) NOT IN (SELECT xid FROM running)),
        (SELECT pg_snapshot_xmax(s)::text::bigint FROM snap)
    ) AS xid
)"""

# `settled` is the highest row whose inserting xid is below the horizon, among the
# WALK highest rows past `after`: every gap under it is final. Above it a row is
# safe only while positions stay contiguous. Row xids are 32 bits: compared modulo
# 2**32. The second column says whether a committed row lies past the mark: one
# beyond a gap the rule did not pass, or past the end of a walk.
# `head` MATERIALIZED: inlined, its walk of `run` ran once for each of the three
# uses of head.position below (halving what a read pays while a long
# transaction elsewhere keeps thousands of rows past the horizon).
_HEAD = """
WITH {horizon}, settled AS (
    SELECT coalesce((
        SELECT top.position FROM horizon, (
            -- Bounded: a long transaction elsewhere keeps every row written since it
            -- began above the horizon, and this walk down would cross them all.
            SELECT e.position, e.xmin::text::bigint AS xid FROM {events} e
            WHERE e.position > %(after)s ORDER BY e.position DESC LIMIT {walk}
        ) top
        WHERE ((horizon.xid - top.xid) & {mask}) BETWEEN 1 AND 2147483647
        ORDER BY top.position DESC LIMIT 1
    ), %(after)s) AS position
), run AS (
    -- A scalar subquery, not a join: the bound must reach the index scan as a
    -- parameter, or the planner walks the whole index from position 1. Bounded
    -- above too, which keeps the same run (it is at most WALK positions long)
    -- and tells the planner a few rows come: with the lower bound alone it took
    -- a third of the log, and on a new log (no statistics yet) read it all.
    SELECT e.position, e.position - row_number() OVER (ORDER BY e.position) AS base
    FROM {events} e
    WHERE e.position > (SELECT position FROM settled)
      AND e.position <= (SELECT position + least({walk}, {max_int} - position) FROM settled)
    ORDER BY e.position LIMIT {walk}
), head AS MATERIALIZED (
    SELECT greatest(
        settled.position,
        (SELECT max(run.position) FROM run WHERE run.base = settled.position)
    ) AS position FROM settled
)
SELECT head.position,
       (SELECT min(e.position) FROM {events} e WHERE e.position > head.position) IS NOT NULL
FROM head
"""


def statements(walk: int) -> tuple[str, str]:
    """The coarse and the precise statement, each walk at most `walk` rows long (tests
    make the walks short to exercise the hand-over between the two)."""
    coarse, precise = (
        _HEAD.format(horizon=horizon, events=E, walk=walk, mask=_MASK, max_int=MAX_INT)
        for horizon in (_COARSE_HORIZON, _PRECISE_HORIZON)
    )
    return coarse, precise


_COARSE, _PRECISE = statements(WALK)

# The oldest append in flight: the one that holds the first position readers wait at.
_OLDEST_WRITER = f"""
WITH {_LOCKS}
SELECT w.pid, extract(epoch FROM now() - coalesce(a.xact_start, p.prepared))::float8
FROM writers w
LEFT JOIN pg_stat_activity a ON a.pid = w.pid
LEFT JOIN pg_prepared_xacts p ON p.transaction::text::bigint = w.xid
ORDER BY w.xid LIMIT 1
"""
_LAST = f"SELECT coalesce(max(position), 0) FROM {E}"


def safe_head(conn: psycopg.Connection[Any], after: int) -> int:
    """The high-water mark above `after` (`after` itself if nothing past it is readable)."""
    head, waiting = _head(conn, _COARSE, after)
    for _ in range(PRECISE_TRIES if waiting else 0):
        head, waiting = _head(conn, _PRECISE, after)
        if not waiting:
            break
    return head


async def safe_head_async(conn: psycopg.AsyncConnection[Any], after: int) -> int:
    """`safe_head` on an async connection: the same statements, the same rule."""
    head, waiting = _answer(await (await conn.execute(_COARSE, {"after": after})).fetchone(), after)
    for _ in range(PRECISE_TRIES if waiting else 0):
        row = await (await conn.execute(_PRECISE, {"after": after})).fetchone()
        head, waiting = _answer(row, after)
        if not waiting:
            break
    return head


_NOW = "SELECT clock_timestamp()"
"""The server's time when asked: `now()` is its transaction's start."""


def database_now(conn: psycopg.Connection[Any]) -> datetime:
    """The server's time."""
    row = conn.execute(_NOW).fetchone()
    assert row is not None
    return cast(datetime, row[0])


async def database_now_async(conn: psycopg.AsyncConnection[Any]) -> datetime:
    """The server's time."""
    row = await (await conn.execute(_NOW)).fetchone()
    assert row is not None
    return cast(datetime, row[0])


def log_status(conn: psycopg.Connection[Any]) -> LogStatus:
    high_water_mark = safe_head(conn, 0)
    row = conn.execute(_LAST).fetchone()
    head = int(row[0]) if row else 0
    if head <= high_water_mark:
        return LogStatus(head=head, high_water_mark=high_water_mark, held=None)
    return _held(head, high_water_mark, conn.execute(_OLDEST_WRITER).fetchone())


async def log_status_async(conn: psycopg.AsyncConnection[Any]) -> LogStatus:
    high_water_mark = await safe_head_async(conn, 0)
    row = await (await conn.execute(_LAST)).fetchone()
    head = int(row[0]) if row else 0
    if head <= high_water_mark:
        return LogStatus(head=head, high_water_mark=high_water_mark, held=None)
    return _held(head, high_water_mark, await (await conn.execute(_OLDEST_WRITER)).fetchone())


def _held(head: int, high_water_mark: int, writer: tuple[Any, ...] | None) -> LogStatus:
    pid, seconds = (writer[0], float(writer[1] or 0.0)) if writer else (None, 0.0)
    held = HeldPosition(position=high_water_mark + 1, pid=pid, seconds=seconds)
    return LogStatus(head=head, high_water_mark=high_water_mark, held=held)


def _head(conn: psycopg.Connection[Any], query: str, after: int) -> tuple[int, bool]:
    return _answer(conn.execute(query, {"after": after}).fetchone(), after)


def _answer(row: tuple[Any, ...] | None, after: int) -> tuple[int, bool]:
    return (int(row[0]), bool(row[1])) if row else (after, False)
