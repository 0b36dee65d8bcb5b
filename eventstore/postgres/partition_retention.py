"""Retention on a partitioned store (`partitions.py`): each partition wholly at or below a
run's mark is replaced by a table of the rows the run keeps, or dropped when it keeps none,
instead of having its removed rows deleted.

A row delete leaves the table and its indexes as large as before, their dead rows to a
vacuum; a replaced partition leaves nothing behind: its old table is dropped whole. What
a run removes is what row deletion would remove, event for event, and with the same
companions: the removed events' key rows (`eventcraft_event_keys`, as an unpartitioned
store's unique index entries go with its rows) and tag rows.

All of it happens in the run's one transaction (PostgreSQL's DDL is transactional), in
this order, so that it promises what row deletion does:

1. For each partition wholly at or below the mark, one pass of the run's rules over its
   rows writes the positions it keeps to a table of the run's own (`_KEPT`). A partition
   the rules take nothing from (and that holds no dead rows of an earlier run, `PENDING`)
   is left alone.
2. Its replacement is made beside it, `CREATE TABLE ... (LIKE eventcraft_events INCLUDING
   INDEXES)` with a CHECK of its range (so that attaching it scans nothing), and filled
   with the kept rows; the removed events' key and tag rows are deleted. No lock that
   readers or appends wait for is taken until here: the events table is read as ever.
3. The events table is locked (ACCESS EXCLUSIVE, waiting at most `SWAP_LOCK_TIMEOUT`),
   and each old partition detached and dropped, its replacement attached and renamed.
   Readers and appends wait from the lock to the run's commit: a few catalog statements.
   Not had in time (a long reader holds the table), the steps above are rolled back to
   their savepoint and the run deletes those partitions' rows as on an unpartitioned
   store, marking them `PENDING`: the next run replaces them.

Why no reader sees a removed event come back or a kept one go: a reader's statement
either ran before the lock was taken (and the run waited for it) or starts after the
commit and, in READ COMMITTED, takes its snapshot once it has the lock, so it sees the
old partitions whole or the new ones whole. A killed run (between detach and attach, or
anywhere) is rolled back by the server as a whole: the old partitions, keys and tags as
they were, and the next run starts afresh. A transaction in REPEATABLE READ whose
snapshot was taken before the commit and that reads the events table only after it sees
a replaced partition empty (the rows were written by the run), as it would a table
`TRUNCATE` emptied: the store's reads are READ COMMITTED statements.

The global-log rule (`schema.py`) holds: every position of a partition wholly at or below
the mark is final (the mark is at most the high-water mark), the rows copied keep their
positions, and their new xid, the run's, is a stranger's (it holds no append lock), which
only makes a reader's coarse rule pass fewer gaps, never more, until the run is older
than every running transaction. Positions are never reused: the stream's newest event is
never removed, and no append draws a position below the head.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from ..retention import rest
from ..sql.deletion import DELETED_STREAMS
from ..sql.schema import EVENTS, TAGS
from . import partitions
from .partitions import KEYS, PARTITION

PENDING = "eventcraft: rows deleted by retention; the next run replaces the partition"
"""The comment on a partition a run deleted rows of (one the mark straddled, or one it
could not lock in time): the next run that finds it wholly below its mark replaces it,
whether or not its rules take more from it, and so drops its dead rows."""
SWAP_LOCK_TIMEOUT = "2s"
"""The longest a run waits for the events table's ACCESS EXCLUSIVE lock the swaps take
(behind a long reader, say): then it deletes rows instead, and the next run swaps."""
_AT_ONCE = 1_000_000
"""Removed events whose key rows one statement deletes, at most (or one partition's, if
more): a join with the key table for several partitions at once, its list of removed
events bounded."""
_KEPT = "eventcraft_retention_kept"
"""The table of the positions a partition keeps, made and dropped in the run's transaction
(unlogged, in the store's schema: a TEMP table would ask the database's TEMPORARY
privilege of the role that runs retention, which may have been revoked)."""


@dataclass(frozen=True)
class Rule:
    """One of a run's rules as SQL: a condition on an event `e`, and its parameters."""

    condition: str
    """A boolean SQL expression on the row `e`, with `%s` placeholders."""
    parameters: tuple[Any, ...]
    """The values of its placeholders, in order."""
    chosen: str = ""
    """The SELECT of the positions it names between two positions (its first two
    placeholders, then `parameters`), where another form than the condition plans better
    for deleting rows (a join): empty, the condition's."""

    def select(self) -> str:
        """The SELECT of the positions of events in (%s, %s] the rule names."""
        return self.chosen or (
            f"SELECT e.position FROM {EVENTS} AS e WHERE e.position > %s "
            f"AND e.position <= %s AND {self.condition}"
        )


@dataclass(frozen=True)
class Replaced:
    """What replacing the partitions wholly below a mark did."""

    removed: int
    """Events removed, every rule's."""
    of_deleted: int
    """Of those, removed by the deleted-streams rule alone (no policy or truncation named
    them): what row deletion, deleted streams last, counts for it."""
    through: int
    """The last position of the last partition wholly at or below the mark: rows above it
    are row deletion's."""
    swapped: tuple[int, ...]
    """The numbers of the partitions replaced (or dropped: none kept)."""


def whole_through(size: int, up_to: int) -> int:
    """The last position of the partitions wholly at or below `up_to` (-1: none is)."""
    return (up_to + 1) // size * size - 1


def replace(
    conn: psycopg.Connection[Any],
    size: int,
    up_to: int,
    rules_for: Callable[[str], tuple[Sequence[Rule], Rule]],
    pace: float = 1.0,
) -> Replaced | None:
    """In a run's transaction (`SET LOCAL eventcraft.retention`): replace each partition
    wholly at or below `up_to` that the run's rules take rows from, or that is `PENDING`,
    by a table of the rows they leave. `rules_for(newest)` gives the rules and the
    deleted-streams rule, a stream's newest version the SQL `newest` (here a column read
    once a stream, not a probe a row). None when the events table's lock was not had
    within `SWAP_LOCK_TIMEOUT`: then nothing was changed (the caller deletes the rows
    instead, and marks the partitions with `mark_pending`)."""
    through = whole_through(size, up_to)
    found = _whole(conn, size, through)
    rules, deleted = rules_for("newest.version")
    others = " OR ".join(f"({rule.condition})" for rule in rules) or "false"
    others_parameters = tuple(p for rule in rules for p in rule.parameters)
    removed = of_deleted = 0
    swapped: list[tuple[int, bool]] = []
    batches: list[list[int]] = [[]]  # the partitions whose keys one statement deletes
    batched = 0
    row = conn.execute(f"SELECT EXISTS (SELECT FROM {DELETED_STREAMS})").fetchone()
    deleting = bool(row and row[0])  # no deleted stream: the rule names no event
    gone_deleted = deleted.condition if deleting else "false"
    deleted_parameters = deleted.parameters if deleting else ()
    waited = conn.execute("SELECT current_setting('lock_timeout')").fetchone()
    restore = sql.SQL("SELECT set_config('lock_timeout', {}, true)").format(
        sql.Literal(waited[0] if waited else "0")
    )
    try:
        with conn.transaction():  # a savepoint: a lock not had leaves the run as it was
            conn.execute(f"CREATE UNLOGGED TABLE {_KEPT} (position bigint PRIMARY KEY)")
            for number, is_pending in found:
                started = time.perf_counter()
                n = _names(conn, number, size)
                # One pass of the rules over the partition: the positions it keeps. Each
                # stream's newest version is read once, for all its rows here.
                kept = conn.execute(
                    f"{_newest(n['old'])} INSERT INTO {_KEPT} SELECT e.position "
                    f"FROM {n['old']} AS e JOIN newest ON newest.stream_id = e.stream_id "
                    f"WHERE NOT (coalesce(({others}), false) "
                    f"OR coalesce(({gone_deleted}), false))",
                    (*others_parameters, *deleted_parameters),
                ).rowcount
                row = conn.execute(f"SELECT count(*) FROM {n['old']}").fetchone()
                total = int(row[0]) if row else 0
                by_deletion = 0
                if total > kept and deleting:
                    row = conn.execute(
                        f"{_newest(n['old'])} SELECT count(*) FROM {n['old']} AS e "
                        "JOIN newest ON newest.stream_id = e.stream_id "
                        f"WHERE coalesce(({deleted.condition}), false) "
                        f"AND NOT coalesce(({others}), false)",
                        (*deleted.parameters, *others_parameters),
                    ).fetchone()
                    by_deletion = int(row[0]) if row else 0
                if total == kept and not is_pending:
                    continue  # nothing to take from it: left as it is
                if kept:
                    conn.execute(
                        f"CREATE TABLE {n['new']} (LIKE {n['events']} INCLUDING DEFAULTS "
                        f"INCLUDING INDEXES, CONSTRAINT {n['check']} "
                        f"CHECK (position >= {n['low']} AND position < {n['high']}))"
                    )
                    conn.execute(
                        f"INSERT INTO {n['new']} SELECT * FROM {n['old']} "
                        f"WHERE position IN (SELECT position FROM {_KEPT} "
                        f"WHERE position >= {n['low']} AND position < {n['high']})"
                    )
                removed += total - kept
                of_deleted += by_deletion
                swapped.append((number, kept > 0))
                if batched + total - kept > _AT_ONCE and batches[-1]:
                    batches.append([])
                    batched = 0
                batches[-1].append(number)
                batched += total - kept
                rest(started, pace)
            for batch in batches:
                if batch:
                    _unkey(conn, [_names(conn, number, size) for number in batch])
            if swapped:
                conn.execute(f"SET LOCAL lock_timeout = '{SWAP_LOCK_TIMEOUT}'")
                conn.execute(f"LOCK TABLE {EVENTS} IN ACCESS EXCLUSIVE MODE")
                conn.execute(restore)
                for number, kept_some in swapped:
                    _swap(conn, _names(conn, number, size), kept_some)
            conn.execute(f"DROP TABLE {_KEPT}")
    except psycopg.errors.LockNotAvailable:
        conn.execute(restore)
        return None
    return Replaced(removed, of_deleted, max(through, 0), tuple(n for n, _ in swapped))


def _unkey(conn: psycopg.Connection[Any], partitions_: Sequence[dict[str, str]]) -> None:
    """Delete the key rows (their ids and versions free again, as an unpartitioned store's
    index entries go with its rows) and tag rows of the events the partitions lose: those
    whose positions are not in `_KEPT`. Several partitions a statement: one join with the
    key table for all their removed events, not one a partition."""
    rows = " UNION ALL ".join(f"SELECT id, position, tags FROM {n['old']}" for n in partitions_)
    conn.execute(
        f"WITH gone AS MATERIALIZED (SELECT e.id, e.position, e.tags FROM ({rows}) AS e "
        f"WHERE NOT EXISTS (SELECT FROM {_KEPT} k WHERE k.position = e.position)), "
        f"keys AS (DELETE FROM {KEYS} k USING gone g WHERE k.id = g.id) "
        f"DELETE FROM {TAGS} t USING gone g, unnest(g.tags) AS u(tag) "
        "WHERE t.tag = u.tag AND t.position = g.position"
    )


def _swap(conn: psycopg.Connection[Any], n: dict[str, str], kept: bool) -> None:
    """The old partition detached and dropped, its replacement (if it keeps rows) attached in
    its place, under its name, guarded as every partition is."""
    statements = [f"ALTER TABLE {n['events']} DETACH PARTITION {n['old']}"]
    if kept:
        statements.append(
            f"ALTER TABLE {n['events']} ATTACH PARTITION {n['new']} "
            f"FOR VALUES FROM ({n['low']}) TO ({n['high']})"
        )
    statements.append(f"DROP TABLE {n['old']}")
    if kept:
        statements += [
            f"ALTER TABLE {n['new']} RENAME TO {n['old']}",
            # The partition's bound says it now.
            f"ALTER TABLE {n['old']} DROP CONSTRAINT {n['check']}",
        ]
    for statement in statements:
        conn.execute(statement)
    if kept:
        partitions.guard_partition(conn, n["name"])


def mark_pending(conn: psycopg.Connection[Any], size: int, numbers: Sequence[int]) -> None:
    """Mark the partitions `numbers`, rows of which a run deleted, `PENDING`."""
    for number in sorted(set(numbers)):
        conn.execute(
            sql.SQL("COMMENT ON TABLE {} IS {}").format(
                sql.Identifier(f"{PARTITION}{number}"), sql.Literal(PENDING)
            )
        )


def _newest(table: str) -> str:
    """A WITH clause of `newest` (stream_id, version): each stream of `table`'s rows and its
    newest version in the key table, read once a stream. MATERIALIZED: inlined, the
    planner probes the key table once a row again."""
    return (
        "WITH newest AS MATERIALIZED (SELECT d.stream_id, "
        f"(SELECT max(s.version) FROM {KEYS} s WHERE s.stream_id = d.stream_id) AS version "
        f"FROM (SELECT DISTINCT stream_id FROM {table}) d)"
    )


def _whole(conn: psycopg.Connection[Any], size: int, through: int) -> list[tuple[int, bool]]:
    """The partitions whose positions are all at or below `through`: each one's number and
    whether it is `PENDING`, in order."""
    rows = conn.execute(
        "SELECT c.relname, coalesce(obj_description(c.oid, 'pg_class') = %s, false) "
        "FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = to_regclass(%s)",
        (PENDING, EVENTS),
    ).fetchall()
    found = []
    for name, is_pending in rows:
        number = str(name).removeprefix(PARTITION)
        if number.isdigit() and (int(number) + 1) * size - 1 <= through:
            found.append((int(number), bool(is_pending)))
    return sorted(found)


def _names(conn: psycopg.Connection[Any], number: int, size: int) -> dict[str, str]:
    """The SQL of the names and bounds of partition `number` and of its replacement."""
    name = f"{PARTITION}{number}"
    return {
        "events": sql.Identifier(EVENTS).as_string(conn),
        "name": name,
        "old": sql.Identifier(name).as_string(conn),
        "new": sql.Identifier(f"{name}_kept").as_string(conn),
        "check": sql.Identifier(f"{name}_kept_range").as_string(conn),
        "low": str(number * size),
        "high": str((number + 1) * size),
    }
