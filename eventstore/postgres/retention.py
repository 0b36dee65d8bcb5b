"""Retention in PostgreSQL: its runs table, its delete trigger, and a run as one transaction.

The store's row trigger refuses UPDATE and DELETE of events; the first run
splits it (in one transaction, under the schema's advisory lock): UPDATE
stays refused by the same row trigger, and DELETE by a statement trigger
that lets a statement through only in a transaction that set
`eventcraft.retention` to `apply`, which only a run does (`SET LOCAL`). A
statement trigger checks once per statement, not once per removed row.

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
from ..sql.schema import APPEND_ONLY_SQLSTATE, EVENTS, SNAPSHOTS, TAGS
from . import partitions
from .connections import ConnectionPool
from .keyed_indexes import matches
from .target import PostgresTarget, session_target

RUNS = "eventcraft_retention_runs"
SETTING = "eventcraft.retention"
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
    f"""CREATE OR REPLACE FUNCTION eventcraft_refuse_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('{SETTING}', true) = 'apply' THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION USING
        ERRCODE = '{APPEND_ONLY_SQLSTATE}',
        MESSAGE = format('%s is append-only: %s refused', TG_TABLE_NAME, TG_OP);
END
$$""",
    f"DROP TRIGGER IF EXISTS {EVENTS}_append_only ON {EVENTS}",
    f"""CREATE TRIGGER {EVENTS}_append_only BEFORE UPDATE ON {EVENTS}
    FOR EACH ROW EXECUTE FUNCTION eventcraft_refuse_change()""",
    f"""CREATE TRIGGER {EVENTS}_no_delete BEFORE DELETE ON {EVENTS}
    FOR EACH STATEMENT EXECUTE FUNCTION eventcraft_refuse_delete()""",
    f"""CREATE TABLE {RUNS} (run bigserial PRIMARY KEY, up_to bigint NOT NULL,
    removed bigint NOT NULL, archive text NOT NULL, rules text NOT NULL,
    finished_at timestamptz NOT NULL)""",
]

_NOT_NEWEST = f"e.version < (SELECT max(s.version) FROM {EVENTS} s WHERE s.stream_id = e.stream_id)"
_BY_POLICY = (
    f"FROM {EVENTS} AS e WHERE {matches('e.category', '%s')} "
    "AND e.position > %s AND e.position <= %s "
    f"AND {_NOT_NEWEST} AND ("
    "e.recorded_at < %s::timestamptz OR e.version <= "
    f"(SELECT max(s.version) FROM {EVENTS} s WHERE s.stream_id = e.stream_id) - %s::bigint)"
)
_BY_TRUNCATION = (
    f"FROM {EVENTS} AS e WHERE e.stream_id = %s AND e.version < %s AND e.position <= %s "
    f"AND {_NOT_NEWEST}"
)

# A deleted stream's events up to its deletion, but its newest (deletion.py).
_BY_DELETION = (
    f"FROM {EVENTS} AS e JOIN {DELETED_STREAMS} AS d ON d.stream_id = e.stream_id "
    f"WHERE e.version <= d.version AND e.position <= %s AND {_NOT_NEWEST}"
)

# The tag rows (postgres/tag_functions.py) of the events a run removed, whichever rule removed them,
# in the run's transaction: a query or an append condition must not find an event the log
# no longer holds. One pass over the tag rows up to the mark, each probing the events' key.
_UNTAG = (
    f"DELETE FROM {TAGS} WHERE position <= %s AND NOT EXISTS "
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


def _policy_parameters(
    policy: RetentionPolicy, after: int, up_to: int, now: datetime
) -> tuple[Any, ...]:
    cutoff = now - policy.max_age if policy.max_age is not None else None
    return (policy.category, policy.category, after, up_to, cutoff, policy.max_count)


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
            counts = []
            for policy in policies:
                parameters = _policy_parameters(policy, 0, up_to, now)
                row = conn.execute(f"SELECT count(*) {_BY_POLICY}", parameters).fetchone()
                counts.append(int(row[0]) if row else 0)
            for cut in truncations:
                parameters = (cut.stream_id, cut.before_version, up_to)
                row = conn.execute(f"SELECT count(*) {_BY_TRUNCATION}", parameters).fetchone()
                counts.append(int(row[0]) if row else 0)
            row = conn.execute(f"SELECT count(*) {_BY_DELETION}", (up_to,)).fetchone()
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
            with conn.transaction():
                conn.execute(f"SET LOCAL {SETTING} = 'apply'")
                removed = 0
                # Whole at full pace; paced, a window of positions a statement, resting
                # between them so that appends keep the machine (the transaction is one).
                step = up_to if pace >= 1 else WINDOW
                for policy in policies:
                    for after in range(0, up_to, max(step, 1)):
                        started = time.perf_counter()
                        parameters = _policy_parameters(
                            policy, after, min(after + step, up_to), now
                        )
                        deleted = conn.execute(
                            f"DELETE FROM {EVENTS} WHERE position IN "
                            f"(SELECT e.position {_BY_POLICY})",
                            parameters,
                        )
                        removed += deleted.rowcount
                        rest(started, pace)
                for cut in truncations:
                    deleted = conn.execute(
                        f"DELETE FROM {EVENTS} WHERE position IN "
                        f"(SELECT e.position {_BY_TRUNCATION})",
                        (cut.stream_id, cut.before_version, up_to),
                    )
                    removed += deleted.rowcount
                of_deleted = conn.execute(
                    f"DELETE FROM {EVENTS} WHERE position IN (SELECT e.position {_BY_DELETION})",
                    (up_to,),
                ).rowcount
                removed += of_deleted
                conn.execute(_UNTAG, (up_to,))
                conn.execute(_UNSNAPSHOT)
                # A partitioned store: its partitions below the mark swapped for their rows
                # kept, so that no dead row stays behind (partitions.compact).
                partitions.compact(conn, up_to)
                rules = rules_text(policies, truncations, of_deleted)
                row = conn.execute(
                    f"INSERT INTO {RUNS} (up_to, removed, archive, rules, finished_at) "
                    f"SELECT greatest(%s, coalesce(max(up_to), 0)), %s, %s, %s, %s FROM {RUNS} "
                    "RETURNING run, up_to, removed, archive, rules, finished_at",
                    (up_to, removed, archive, rules, now),
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
            yield
        finally:
            self._holding = None
            conn.close()  # ends the session, and with it the lock

    def close(self) -> None:
        self._pool.close()


def _installed(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (RUNS,)).fetchone()
    return bool(row and row[0])
