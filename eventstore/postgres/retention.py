"""Retention in PostgreSQL: its runs table, its delete trigger, and a run as one transaction.

The store's row trigger refuses UPDATE and DELETE of events; the first run
splits it (in one transaction, under the schema's advisory lock): UPDATE
stays refused by the same row trigger, and DELETE by a statement trigger
that lets a statement through only in a transaction that set
`eventcraft.retention` to `apply`, which only a run does (`SET LOCAL`,
`delete_refusal.py`). A statement trigger checks once per statement, not once
per removed row. A partitioned store's partitions each carry one too.

On a partitioned store the partitions wholly at or below a run's mark are
replaced by tables of their kept rows (`partition_retention.py`); rows are
deleted only in the partition the mark straddles, and the removed events' key
rows go with them.

A run takes no lock that appends take (not the append lock, not the
streams'): appends go on while it deletes, and readers past its `up_to`
never meet what it removes; its transaction is a stranger to the ordering
rule (`schema.py`), which it never holds back.

The store's retention lock (`exclusive`) is a session-level advisory lock,
keyed like the append lock by the events table's oid (so one per store, each
schema its own) under a tag of its own, held by a connection of its own for the
whole run. Session-level, not a transaction's: a transaction left open while
a run archives for hours would be killed by an idle-in-transaction timeout,
while an idle session holds no snapshot and no xid, so it holds back neither
vacuum nor readers. The server drops it when the session ends, a holder's
process killed included.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, TypeVar

import psycopg

from ..arguments import redacted
from ..errors import RetentionBusy, StoreUnavailable
from ..retention import (
    Retention,
    RetentionPolicy,
    RetentionRun,
    Truncation,
    check_pace,
    rest,
    rules_text,
)
from ..sql.deletion import DELETED_STREAMS
from ..sql.schema import EVENTS, SNAPSHOTS, TAGS
from . import delete_refusal, partition_retention, partitions
from .connections import ConnectionPool
from .keyed_indexes import matches
from .partition_retention import Rule
from .partitions import KEYS
from .target import PostgresTarget, session_target

RUNS = "eventcraft_retention_runs"
SETTING = delete_refusal.SETTING
RUN_LOCK_TAG = 0x6572
"""The high 32 bits of the retention lock's key ("er"); the low 32 are the events table's
oid, as in the append lock's (`schema.LOG_LOCK_KEY`), whose tag differs."""
RUN_LOCK_KEY = f"(({RUN_LOCK_TAG}::bigint << 32) | '{EVENTS}'::regclass::oid::bigint)"

# Who holds the lock: `pg_locks` shows a bigint key as classid (high) and objid (low).
_HOLDER = f"""SELECT a.pid, a.client_addr, a.backend_start
FROM pg_locks AS l JOIN pg_stat_activity AS a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
AND l.classid = {RUN_LOCK_TAG} AND l.objid = '{EVENTS}'::regclass::oid"""

T = TypeVar("T")

_INSTALL = [
    # The events table first, then its partitions, as every reader and writer locks them:
    # DROP TRIGGER alone would lock each partition before it upgrades its lock on the table
    # (to drop their copies of the row trigger), and deadlock with a reader between the two.
    # And before the function: a partitioned store's appends lock it (the trigger on a
    # partition they make refers to it) while they hold the table.
    f"LOCK TABLE {EVENTS} IN ACCESS EXCLUSIVE MODE",
    delete_refusal.FUNCTION,
    f"DROP TRIGGER IF EXISTS {EVENTS}_append_only ON {EVENTS}",
    f"""CREATE TRIGGER {EVENTS}_append_only BEFORE UPDATE ON {EVENTS}
    FOR EACH ROW EXECUTE FUNCTION eventcraft_refuse_change()""",
    f"""CREATE TRIGGER {EVENTS}_no_delete BEFORE DELETE ON {EVENTS}
    FOR EACH STATEMENT EXECUTE FUNCTION eventcraft_refuse_delete()""",
    f"""CREATE TABLE {RUNS} (run bigserial PRIMARY KEY, up_to bigint NOT NULL,
    removed bigint NOT NULL, archive text NOT NULL, rules text NOT NULL,
    finished_at timestamptz NOT NULL)""",
]


def _newest(table: str) -> str:
    """A stream's newest version, read from `table`: the events, or a partitioned store's
    key table (one probe of its unique index, not one a partition)."""
    return f"(SELECT max(s.version) FROM {table} s WHERE s.stream_id = e.stream_id)"


def _policy_rule(policy: RetentionPolicy, now: datetime, newest: str) -> Rule:
    cutoff = now - policy.max_age if policy.max_age is not None else None
    return Rule(
        f"{matches('e.category', '%s')} AND e.version < {newest} AND ("
        f"e.recorded_at < %s::timestamptz OR e.version <= {newest} - %s::bigint)",
        (policy.category, policy.category, cutoff, policy.max_count),
    )


def _truncation_rule(cut: Truncation, newest: str) -> Rule:
    return Rule(
        f"e.stream_id = %s AND e.version < %s AND e.version < {newest}",
        (cut.stream_id, cut.before_version),
    )


def _deletion_rule(newest: str) -> Rule:
    """A deleted stream's events up to its deletion, but its newest (deletion.py). Rows are
    chosen by a join, driven by the deleted streams (few, or none: then the events are
    not even read), where the condition alone had the planner probe each event's
    stream's newest version first."""
    return Rule(
        f"EXISTS (SELECT FROM {DELETED_STREAMS} d "
        f"WHERE d.stream_id = e.stream_id AND e.version <= d.version) AND e.version < {newest}",
        (),
        f"SELECT e.position FROM {EVENTS} AS e JOIN {DELETED_STREAMS} AS d "
        "ON d.stream_id = e.stream_id WHERE e.position > %s AND e.position <= %s "
        f"AND e.version <= d.version AND e.version < {newest}",
    )


def _rules(
    policies: Sequence[RetentionPolicy],
    truncations: Sequence[Truncation],
    now: datetime,
    newest: str,
) -> tuple[list[Rule], Rule]:
    """A run's policies and truncations as SQL, then the deleted streams' rule; a stream's
    newest version the SQL `newest`."""
    rules = [_policy_rule(policy, now, newest) for policy in policies]
    rules += [_truncation_rule(cut, newest) for cut in truncations]
    return rules, _deletion_rule(newest)


# The tag rows (postgres/tag_functions.py) of the events a run removed, whichever rule removed them,
# in the run's transaction: a query or an append condition must not find an event the log
# no longer holds. One pass over the tag rows up to the mark, each probing the events' key.
_UNTAG = (
    f"DELETE FROM {TAGS} WHERE position > %s AND position <= %s AND NOT EXISTS "
    f"(SELECT 1 FROM {EVENTS} AS e WHERE e.position = {TAGS}.position)"
)


# The snapshots of deleted streams, taken at or before their deletion, in the run's
# transaction: no read loads one again (`deletion_sql.SNAPSHOT_SHOWN`), and one kept would
# hold a deleted (even tombstoned) stream's whole state after its events went.
_UNSNAPSHOT = (
    f"DELETE FROM {SNAPSHOTS} WHERE version <= (SELECT d.version FROM {DELETED_STREAMS} d "
    f"WHERE d.stream_id = {SNAPSHOTS}.stream_id)"
)

WINDOW = 100_000
"""Positions a paced run removes per statement, resting between them."""


class PostgresRetention(Retention):
    def __init__(self, url: str) -> None:
        self.target = PostgresTarget.from_url(url)
        self.url = redacted(url)
        # Connections of its own, opened as needed: to PostgreSQL itself behind a
        # transaction pooler if the URL names it, for the lock's session (`exclusive`).
        self._pool = ConnectionPool(self.target.direct_target() or self.target)
        self._holding: psycopg.Connection[Any] | None = None
        """The session holding the store's retention lock (`exclusive`), while it does."""

    def _run(
        self,
        work: Callable[[psycopg.Connection[Any]], T],
        on: psycopg.Connection[Any] | None = None,
    ) -> T:
        """`work` on a pooled connection, or `on`; driver errors as `StoreUnavailable`."""
        try:
            return self._pool.run(work) if on is None else work(on)
        except psycopg.Error as error:
            raise StoreUnavailable(f"retention of {self.url}: {error}") from error

    def low_water_mark(self) -> int:
        def work(conn: psycopg.Connection[Any]) -> int:
            if not _installed(conn):
                return 0
            row = conn.execute(f"SELECT coalesce(max(up_to), 0) FROM {RUNS}").fetchone()
            return int(row[0]) if row else 0

        return self._run(work)

    def runs(self) -> list[RetentionRun]:
        def work(conn: psycopg.Connection[Any]) -> list[RetentionRun]:
            if not _installed(conn):
                return []
            rows = conn.execute(
                f"SELECT run, up_to, removed, archive, rules, finished_at FROM {RUNS} ORDER BY run"
            )
            return [RetentionRun(*row) for row in rows]

        return self._run(work)

    def count(
        self,
        policies: Sequence[RetentionPolicy],
        truncations: Sequence[Truncation],
        up_to: int,
        now: datetime,
    ) -> list[int]:
        def work(conn: psycopg.Connection[Any]) -> list[int]:
            newest = _newest(KEYS if partitions.size_of(conn) else EVENTS)
            rules, deleted = _rules(policies, truncations, now, newest)
            counts = []
            for rule in [*rules, deleted]:
                row = conn.execute(
                    f"SELECT count(*) FROM ({rule.select()}) AS chosen",
                    (0, up_to, *rule.parameters),
                ).fetchone()
                counts.append(int(row[0]) if row else 0)
            return counts

        return self._run(work)

    def remove(
        self,
        policies: Sequence[RetentionPolicy],
        truncations: Sequence[Truncation],
        up_to: int,
        archive: str,
        now: datetime,
        pace: float = 1.0,
    ) -> RetentionRun:
        check_pace(pace)

        def work(conn: psycopg.Connection[Any]) -> RetentionRun:
            if not _installed(conn):
                with conn.transaction():
                    # Processes running their first retention at once must not race on the DDL.
                    conn.execute(
                        "SELECT pg_advisory_xact_lock(hashtext(%s))",
                        (f"{RUNS}:{self.target.schema}",),
                    )
                    if not _installed(conn):
                        for statement in _INSTALL:
                            conn.execute(statement.encode())
            size = partitions.size_of(conn)
            rules, deleted = _rules(policies, truncations, now, _newest(KEYS if size else EVENTS))
            with conn.transaction():
                conn.execute(f"SET LOCAL {SETTING} = 'apply'")
                # A partitioned store: the partitions wholly at or below the mark are
                # replaced by their kept rows at the end (partition_retention.py); rows
                # are deleted only above them, in the partition the mark straddles.
                through = 0 if size is None else partition_retention.whole_through(size, up_to)
                removed, of_deleted = _delete(
                    conn, rules, deleted, max(through, 0), up_to, size, pace
                )
                conn.execute(_UNSNAPSHOT)
                if size is not None and through > 0:

                    def rules_for(newest: str) -> tuple[list[Rule], Rule]:
                        return _rules(policies, truncations, now, newest)

                    replaced = partition_retention.replace(conn, size, up_to, rules_for, pace)
                    if replaced is None:  # the events table not locked in time: rows deleted
                        more, more_deleted = _delete(conn, rules, deleted, 0, through, size, pace)
                    else:
                        more, more_deleted = replaced.removed, replaced.of_deleted
                    removed += more
                    of_deleted += more_deleted
                rules_run = rules_text(policies, truncations, of_deleted)
                row = conn.execute(
                    f"INSERT INTO {RUNS} (up_to, removed, archive, rules, finished_at) "
                    f"SELECT greatest(%s, coalesce(max(up_to), 0)), %s, %s, %s, %s FROM {RUNS} "
                    "RETURNING run, up_to, removed, archive, rules, finished_at",
                    (up_to, removed, archive, rules_run, now),
                ).fetchone()
            assert row is not None
            return RetentionRun(*row)

        # Under `exclusive`, removed by the session that holds the lock: had that session
        # ended (the server restarted, the connection was cut), another run could hold the
        # lock now, and this removal fails with it instead of removing beside that run.
        return self._run(work, self._holding)

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        # Not a pooled connection: the lock is its session's, kept until the run ends.
        session_target(self._pool.target, "retention's lock (a session-level advisory lock)")
        conn = self._pool.connect()
        try:
            try:
                row = conn.execute(f"SELECT pg_try_advisory_lock({RUN_LOCK_KEY})").fetchone()
                holder = None if row and row[0] else conn.execute(_HOLDER).fetchone()
            except psycopg.Error as error:
                raise StoreUnavailable(f"retention of {self.url}: {error}") from error
            if not (row and row[0]):
                by = (
                    f"PostgreSQL backend {holder[0]} from {holder[1] or 'a local socket'}, "
                    f"connected at {holder[2]:%Y-%m-%d %H:%M:%S%z}"
                    if holder
                    else "a session that has just ended"
                )
                raise RetentionBusy(
                    f"another retention run holds the retention lock of the store "
                    f"{self.url} ({by}): this run did nothing; run it again when that one "
                    "has finished"
                )
            self._holding = conn
            try:
                yield
            finally:
                # Given back now: closing alone frees it only once the server's backend
                # has exited, later than the next run of this process may ask for it.
                with contextlib.suppress(psycopg.Error):
                    conn.execute(f"SELECT pg_advisory_unlock({RUN_LOCK_KEY})")
        finally:
            self._holding = None
            conn.close()  # ends the session (and with it the lock, if it was not given back)

    def close(self) -> None:
        self._pool.close()


def _delete(
    conn: psycopg.Connection[Any],
    rules: Sequence[Rule],
    deleted: Rule,
    after: int,
    up_to: int,
    size: int | None,
    pace: float,
) -> tuple[int, int]:
    """Delete the events in (`after`, `up_to`] that `rules`, then `deleted` (the deleted
    streams' rule), name, and their tag rows; on a partitioned store (`size`) their key
    rows too, and each partition rows were deleted from marked `PENDING`. The events
    removed, and of those by `deleted`'s rule alone. Whole at full pace; paced, a window
    of positions a statement, resting between them so that appends keep the machine."""
    step = up_to if pace >= 1 else WINDOW
    removed = of_deleted = 0
    touched: set[int] = set()
    for rule in [*rules, deleted]:
        for low in range(after, up_to, max(step, 1)):
            started = time.perf_counter()
            parameters = (low, min(low + step, up_to), *rule.parameters)
            chosen = rule.select()
            if size is None:
                count = conn.execute(
                    f"DELETE FROM {EVENTS} WHERE position IN ({chosen})", parameters
                ).rowcount
            else:
                # The key rows go with the events, as an unpartitioned store's index
                # entries go with its rows: their ids and versions are free again.
                row = conn.execute(
                    f"WITH gone AS (DELETE FROM {EVENTS} WHERE position IN ({chosen}) "
                    "RETURNING id, position), "
                    f"keys AS (DELETE FROM {KEYS} k USING gone WHERE k.id = gone.id) "
                    "SELECT count(*), coalesce(array_agg(DISTINCT gone.position / %s), '{}') "
                    "FROM gone",
                    (*parameters, size),
                ).fetchone()
                assert row is not None
                count = int(row[0])
                touched.update(int(number) for number in row[1])
            removed += count
            if rule is deleted:
                of_deleted += count
            rest(started, pace)
    conn.execute(_UNTAG, (after, up_to))
    if size is not None:
        partition_retention.mark_pending(conn, size, sorted(touched))
    return removed, of_deleted


def _installed(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (RUNS,)).fetchone()
    return bool(row and row[0])
