"""The key table in SQLite: `eventcraft_keys` in the store's file (PostgreSQL's:
`postgres/key_table.py`),
made when a first key is.

One row per key: its id, its subject, its material (NULL once forgotten)
and when it was made and forgotten; at most one live key per subject (a
partial unique index). A forget must leave the key in none of the
database's files, which an ordinary DELETE does not promise. In SQLite the
key table's connection writes with `secure_delete`, so freed space is
zeroed, overwrites the key with zeros in place before clearing it, then
checkpoints the WAL and truncates it (the WAL holds the pages the key was
written in). A checkpoint that readers keep from finishing is logged: the
WAL keeps the old page until the next one.

Only sealing makes a SQLite key store's file: a read or forget of one that
is not there finds no key and leaves no file behind (a mistyped path would
otherwise become an empty key store that answers "nothing was sealed").
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Collection, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from ..errors import StoreUnavailable
from ..personal.key_table import KEY_BYTES, KEYS, DataKey, KeyTable, new_key
from .transaction import immediate

log = logging.getLogger("eventcraft.eventstore")

T = TypeVar("T")

_CHUNK = 500  # subjects or ids per statement, well under SQLite's bound-parameter limit


def _chunks(values: Collection[str]) -> Iterator[list[str]]:
    listed = list(values)
    for start in range(0, len(listed), _CHUNK):
        yield listed[start : start + _CHUNK]


class SQLiteKeyTable(KeyTable):
    def __init__(self, path: str) -> None:
        self.path = path
        self.url = f"sqlite:///{path}"
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    def _connection(self, create: bool) -> sqlite3.Connection | None:
        """The table's connection; None when its file is not there and not to be made."""
        if self._conn is None:
            if not create and not Path(self.path).is_file():
                return None
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=60.0
            )
            conn.execute("PRAGMA busy_timeout = 60000")
            conn.execute("PRAGMA journal_mode = WAL")
            # Zeroes what this connection frees, the key's old cells included.
            conn.execute("PRAGMA secure_delete = ON")
            self._conn = conn
        return self._conn

    def _run(
        self, work: Callable[[sqlite3.Connection], T], absent: T, *, create: bool = False
    ) -> T:
        """`work` on the connection; `absent` when the file is not there and not `create`d."""
        with self._lock:
            try:
                conn = self._connection(create)
                return absent if conn is None else work(conn)
            except sqlite3.Error as error:
                raise StoreUnavailable(f"key store {self.url}: {error}") from error

    def live_keys(self, subjects: Collection[str]) -> dict[str, DataKey]:
        def find(conn: sqlite3.Connection, wanted: Collection[str]) -> dict[str, DataKey]:
            found = {}
            for chunk in _chunks(wanted):
                marks = ", ".join("?" * len(chunk))
                for key_id, subject, material in conn.execute(
                    f"SELECT key_id, subject, material FROM {KEYS} "
                    f"WHERE material IS NOT NULL AND subject IN ({marks})",
                    chunk,
                ):
                    found[subject] = DataKey(key_id, subject, bytes(material))
            return found

        def work(conn: sqlite3.Connection) -> dict[str, DataKey]:
            found = find(conn, subjects) if _has_table(conn) else {}
            if len(found) == len(subjects):
                return found
            with immediate(conn):
                _create_sqlite(conn)
                found.update(find(conn, [s for s in subjects if s not in found]))
                made = [new_key(s) for s in subjects if s not in found]
                conn.executemany(
                    f"INSERT INTO {KEYS} (key_id, subject, material, created_at) "
                    "VALUES (?, ?, ?, ?)",
                    [(k.id, k.subject, k.material, _now()) for k in made],
                )
            found.update((key.subject, key) for key in made)
            return found

        return self._run(work, {}, create=True)

    def keys(self, key_ids: Collection[str]) -> dict[str, DataKey]:
        def work(conn: sqlite3.Connection) -> dict[str, DataKey]:
            if not _has_table(conn):
                return {}
            found = {}
            for chunk in _chunks(key_ids):
                marks = ", ".join("?" * len(chunk))
                for key_id, subject, material in conn.execute(
                    f"SELECT key_id, subject, material FROM {KEYS} WHERE key_id IN ({marks})",
                    chunk,
                ):
                    found[key_id] = DataKey(
                        key_id, subject, bytes(material) if material is not None else None
                    )
            return found

        return self._run(work, {})

    def forget(self, subject: str) -> int:
        def work(conn: sqlite3.Connection) -> int:
            if not _has_table(conn):
                return 0
            with immediate(conn):
                # Zeros of the same length first: SQLite overwrites the cell in place.
                erased = conn.execute(
                    f"UPDATE {KEYS} SET material = zeroblob(?) "
                    "WHERE subject = ? AND material IS NOT NULL",
                    (KEY_BYTES, subject),
                ).rowcount
                conn.execute(
                    f"UPDATE {KEYS} SET material = NULL, forgotten_at = ? "
                    "WHERE subject = ? AND material IS NOT NULL",
                    (_now(), subject),
                )
            if erased:
                busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
                if busy:
                    log.warning(
                        "forgot %r in %s, but readers kept the checkpoint from finishing: "
                        "the WAL keeps the old key until the next checkpoint",
                        subject,
                        self.url,
                    )
            return int(erased)

        return self._run(work, 0)

    def of_subject(self, subject: str) -> list[DataKey]:
        def work(conn: sqlite3.Connection) -> list[DataKey]:
            if not _has_table(conn):
                return []
            rows = conn.execute(
                f"SELECT key_id, material FROM {KEYS} WHERE subject = ? ORDER BY created_at",
                (subject,),
            )
            return [DataKey(k, subject, bytes(m) if m is not None else None) for k, m in rows]

        return self._run(work, [])

    def holds_keys(self) -> bool:
        def work(conn: sqlite3.Connection) -> bool:
            return _has_table(conn) and bool(
                conn.execute(f"SELECT 1 FROM {KEYS} LIMIT 1").fetchall()
            )

        return self._run(work, False)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def _has_table(conn: sqlite3.Connection) -> bool:
    return bool(
        conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (KEYS,)
        ).fetchall()
    )


def _create_sqlite(conn: sqlite3.Connection) -> None:
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {KEYS} (key_id TEXT PRIMARY KEY, subject TEXT NOT NULL, "
        "material BLOB, created_at TEXT NOT NULL, forgotten_at TEXT)"
    )
    conn.execute(
        f"CREATE UNIQUE INDEX IF NOT EXISTS {KEYS}_live ON {KEYS} (subject) "
        "WHERE material IS NOT NULL"
    )


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")
