"""Retention in SQLite: its runs table, its delete trigger, and a run as one transaction.

The store's trigger refuses every DELETE of an event; a run replaces it (once,
as the first run begins) by one that refuses a DELETE unless a row of
`eventcraft_retention_active` exists, which a run inserts and deletes inside
its own write transaction: no other connection ever sees it. A run holds
SQLite's write lock throughout, as every writer does: appends wait for it.

The store's retention lock (`exclusive`) is a `flock` on a file beside the
database, `<database>.retention.lock`, not one of SQLite's own locks: those are
its write transaction's, and a run holds the lock for its whole archiving,
which may take hours while appends must go on. A `flock` holds across the
processes of one host, which is as far as SQLite's own locking is safe anyway
(not over network filesystems), and is dropped when its holder dies.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from ..errors import RetentionBusy, StoreUnavailable
from ..events import recorded_at_text
from ..file_lock import file_lock
from ..retention import (
    Retention,
    RetentionPolicy,
    RetentionRun,
    Truncation,
    check_pace,
    rules_text,
)
from ..sql.deletion import DELETED_STREAMS
from ..sql.schema import EVENTS, SNAPSHOTS, TAGS
from .transaction import immediate

RUNS = "eventcraft_retention_runs"
ACTIVE = "eventcraft_retention_active"
RETENTION_LOCK_SUFFIX = ".retention.lock"
"""Added to the database file's path: the file whose lock is the store's retention lock.

Example::

    from pathlib import Path

    from eventcraft.eventstore import RETENTION_LOCK_SUFFIX, EventStore

    with EventStore.open("sqlite:///shop.db") as store, store.retention.exclusive():
        # What an operator looks at: the lock's file, naming the process of the run.
        lock = Path("shop.db" + RETENTION_LOCK_SUFFIX)
        assert lock.name == "shop.db.retention.lock" and lock.read_text().strip().isdigit()
"""

T = TypeVar("T")

_INSTALL = [
    f"""CREATE TABLE IF NOT EXISTS {RUNS} (run INTEGER PRIMARY KEY, up_to INTEGER NOT NULL,
    removed INTEGER NOT NULL, archive TEXT NOT NULL, rules TEXT NOT NULL,
    finished_at TEXT NOT NULL)""",
    f"CREATE TABLE IF NOT EXISTS {ACTIVE} (run INTEGER NOT NULL)",
    f"DROP TRIGGER IF EXISTS {EVENTS}_no_delete",
    f"""CREATE TRIGGER {EVENTS}_no_delete BEFORE DELETE ON {EVENTS}
    WHEN NOT EXISTS (SELECT 1 FROM {ACTIVE})
    BEGIN SELECT RAISE(ABORT, '{EVENTS} is append-only: DELETE refused'); END""",
]

_NOT_NEWEST = f"e.version < (SELECT max(s.version) FROM {EVENTS} s WHERE s.stream_id = e.stream_id)"
_BY_POLICY = (
    f"FROM {EVENTS} AS e WHERE e.category = ? AND e.position <= ? AND {_NOT_NEWEST} AND ("
    "e.recorded_at < ? OR e.version <= "
    f"(SELECT max(s.version) FROM {EVENTS} s WHERE s.stream_id = e.stream_id) - ?)"
)
_BY_TRUNCATION = (
    f"FROM {EVENTS} AS e WHERE e.stream_id = ? AND e.version < ? AND e.position <= ? "
    f"AND {_NOT_NEWEST}"
)

# A deleted stream's events up to its deletion, but its newest (deletion.py).
_BY_DELETION = (
    f"FROM {EVENTS} AS e WHERE e.stream_id IN (SELECT stream_id FROM {DELETED_STREAMS}) "
    f"AND e.version <= (SELECT d.version FROM {DELETED_STREAMS} d "
    f"WHERE d.stream_id = e.stream_id) AND e.position <= ? AND {_NOT_NEWEST}"
)

# The tag rows (postgres/tag_functions.py) of the events a run removed, whichever rule removed them,
# in the run's transaction: a query or an append condition must not find an event the log
# no longer holds. One pass over the tag rows up to the mark, each probing the events' key.
_UNTAG = (
    f"DELETE FROM {TAGS} WHERE position <= ? AND NOT EXISTS "
    f"(SELECT 1 FROM {EVENTS} AS e WHERE e.position = {TAGS}.position)"
)

# The snapshots of deleted streams, taken at or before their deletion, in the run's
# transaction: no read loads one again (`deletion_sql.SNAPSHOT_SHOWN`), and one kept would
# hold a deleted (even tombstoned) stream's whole state after its events went.
_UNSNAPSHOT = (
    f"DELETE FROM {SNAPSHOTS} WHERE version <= (SELECT d.version FROM {DELETED_STREAMS} d "
    f"WHERE d.stream_id = {SNAPSHOTS}.stream_id)"
)


def _policy_parameters(policy: RetentionPolicy, up_to: int, now: datetime) -> tuple[Any, ...]:
    cutoff = recorded_at_text(now - policy.max_age) if policy.max_age is not None else None
    return (policy.category, up_to, cutoff, policy.max_count)


class SQLiteRetention(Retention):
    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            try:
                if self._conn is None:
                    self._conn = sqlite3.connect(
                        self.path, isolation_level=None, check_same_thread=False, timeout=60.0
                    )
                    self._conn.execute("PRAGMA busy_timeout = 60000")
                return work(self._conn)
            except sqlite3.Error as error:
                raise StoreUnavailable(f"retention of {self.path}: {error}") from error

    def low_water_mark(self) -> int:
        def work(conn: sqlite3.Connection) -> int:
            if not _installed(conn):
                return 0
            (mark,) = conn.execute(f"SELECT coalesce(max(up_to), 0) FROM {RUNS}").fetchone()
            return int(mark)

        return self._run(work)

    def runs(self) -> list[RetentionRun]:
        def work(conn: sqlite3.Connection) -> list[RetentionRun]:
            if not _installed(conn):
                return []
            rows = conn.execute(
                f"SELECT run, up_to, removed, archive, rules, finished_at FROM {RUNS} ORDER BY run"
            )
            return [
                RetentionRun(r, u, n, a, t, datetime.fromisoformat(f)) for r, u, n, a, t, f in rows
            ]

        return self._run(work)

    def count(
        self,
        policies: Sequence[RetentionPolicy],
        truncations: Sequence[Truncation],
        up_to: int,
        now: datetime,
    ) -> list[int]:
        def work(conn: sqlite3.Connection) -> list[int]:
            counts = []
            for policy in policies:
                parameters = _policy_parameters(policy, up_to, now)
                counts.append(
                    conn.execute(f"SELECT count(*) {_BY_POLICY}", parameters).fetchone()[0]
                )
            for cut in truncations:
                parameters = (cut.stream_id, cut.before_version, up_to)
                counts.append(
                    conn.execute(f"SELECT count(*) {_BY_TRUNCATION}", parameters).fetchone()[0]
                )
            counts.append(conn.execute(f"SELECT count(*) {_BY_DELETION}", (up_to,)).fetchone()[0])
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
        check_pace(pace)  # and never rests: the run holds SQLite's one write lock

        def work(conn: sqlite3.Connection) -> RetentionRun:
            if not _installed(conn):
                with immediate(conn):
                    for statement in _INSTALL:
                        conn.execute(statement)
            with immediate(conn):
                conn.execute(f"INSERT INTO {ACTIVE} (run) VALUES (1)")
                removed = 0
                for policy in policies:
                    parameters = _policy_parameters(policy, up_to, now)
                    removed += conn.execute(
                        f"DELETE FROM {EVENTS} WHERE position IN (SELECT e.position {_BY_POLICY})",
                        parameters,
                    ).rowcount
                for cut in truncations:
                    removed += conn.execute(
                        f"DELETE FROM {EVENTS} WHERE position IN "
                        f"(SELECT e.position {_BY_TRUNCATION})",
                        (cut.stream_id, cut.before_version, up_to),
                    ).rowcount
                deleted = conn.execute(
                    f"DELETE FROM {EVENTS} WHERE position IN (SELECT e.position {_BY_DELETION})",
                    (up_to,),
                ).rowcount
                removed += deleted
                conn.execute(_UNTAG, (up_to,))
                conn.execute(_UNSNAPSHOT)
                conn.execute(f"DELETE FROM {ACTIVE}")
                (mark,) = conn.execute(f"SELECT coalesce(max(up_to), 0) FROM {RUNS}").fetchone()
                finished = recorded_at_text(now)
                rules = rules_text(policies, truncations, deleted)
                cursor = conn.execute(
                    f"INSERT INTO {RUNS} (up_to, removed, archive, rules, finished_at) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (max(up_to, mark), removed, archive, rules, finished),
                )
            return RetentionRun(
                int(cursor.lastrowid or 0), max(up_to, mark), removed, archive, rules, now
            )

        return self._run(work)

    def exclusive(self) -> AbstractContextManager[None]:
        # Absolute: the message names the file whatever directory the reader is in.
        path = Path(os.path.abspath(self.path) + RETENTION_LOCK_SUFFIX)

        def busy(holder: str) -> RetentionBusy:
            return RetentionBusy(
                f"another retention run holds {path} (process {holder}), the lock of the "
                f"store {self.path}: this run did nothing; run it again when that one has "
                "finished"
            )

        return file_lock(path, busy)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def _installed(conn: sqlite3.Connection) -> bool:
    found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (RUNS,))
    return bool(found.fetchall())
