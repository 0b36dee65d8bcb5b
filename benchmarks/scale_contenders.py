"""What `benchmarks.scale` compares: our store beside a plain table, on PostgreSQL and SQLite.

Both sides hold the same events: streams of `STREAM_LENGTH` events, named
`cat{n % 100}-{n}`, so each of the 100 categories holds 1% of the log, spread
evenly over it. The plain table is what a careful hand-written log would be:
(position, id, stream_id, version, type, data) with a unique id and a unique
(stream_id, version), time-ordered ids (the same `new_event_id` as ours), a
plain INSERT for one event, the rows of a batch in one transaction (by COPY on
PostgreSQL, the fastest way in; by `executemany` on SQLite), and reads that
fetch the rows and decode their JSON, building nothing more.
"""

from __future__ import annotations

import abc
import sqlite3
from pathlib import Path
from typing import Any

import orjson
import psycopg
from eventcraft.eventstore import EventStore, NewEvent, new_event_id
from psycopg.types.json import set_json_loads

from .contenders import PG, payload

STREAM_LENGTH = 100
"""Events in each stream of the loaded log, appended in one batch."""
CATEGORIES = 100
PAGE = 1000
"""Events in a global or a category page."""
RARE = "cat37"
"""The category a category page reads: 1% of the log."""


def stream_name(n: int) -> str:
    return f"cat{n % CATEGORIES}-{n}"


Events = list[tuple[str, dict[str, Any]]]


def batch(length: int) -> Events:
    """The (type, data) of each event of a stream of `length`."""
    return [("Opened" if n == 0 else "Deposited", payload(n)) for n in range(length)]


class Side(abc.ABC):
    """One contender on one backend: appends and reads of the same events."""

    name: str

    @abc.abstractmethod
    def append_stream(self, stream_id: str, events: Events) -> None:
        """The events of a new stream, in one transaction."""

    @abc.abstractmethod
    def append_one(self, stream_id: str, version: int, data: dict[str, Any]) -> None:
        """One event at `version` (the stream is at `version - 1`)."""

    @abc.abstractmethod
    def load_stream(self, stream_id: str) -> int:
        """Read a whole stream, its data decoded; the number of events."""

    @abc.abstractmethod
    def global_page(self, after: int, limit: int = PAGE) -> int:
        """The `limit` events of the log after position `after`; how many came."""

    @abc.abstractmethod
    def category_page(self, category: str, after: int) -> int:
        """The next `PAGE` events of `category` after position `after`; how many came."""

    @abc.abstractmethod
    def size_bytes(self) -> int:
        """What the log takes on disk: tables, indexes and their overhead."""

    def settle(self) -> None:  # noqa: B027 (most sides have nothing to do)
        """After the log grew: what autovacuum would do in time (PostgreSQL's statistics)."""

    @abc.abstractmethod
    def close(self) -> None: ...


class Ours(Side):
    name = "eventcraft"

    def __init__(self, url: str, server: str = "") -> None:
        self.url = url
        self.server = server
        self.store = EventStore.open(url)

    def append_stream(self, stream_id: str, events: Events) -> None:
        self.store.append(stream_id, [NewEvent(t, d) for t, d in events], 0)

    def append_one(self, stream_id: str, version: int, data: dict[str, Any]) -> None:
        self.store.append(stream_id, [NewEvent("Deposited", data)], version - 1)

    def load_stream(self, stream_id: str) -> int:
        return len(list(self.store.read_stream(stream_id)))

    def global_page(self, after: int, limit: int = PAGE) -> int:
        return len(list(self.store.read_all(after=after, limit=limit)))

    def category_page(self, category: str, after: int) -> int:
        return len(list(self.store.read_all(after=after, limit=PAGE, categories=[category])))

    def size_bytes(self) -> int:
        if self.url.startswith("sqlite"):
            return sqlite_bytes(Path(self.url.removeprefix("sqlite:///")))
        return postgres_bytes(self.server, self._schema())

    def settle(self) -> None:
        if not self.url.startswith("sqlite"):
            analyze(self.server, self._schema())

    def _schema(self) -> str:
        return self.url.split("schema=", 1)[1].split("&", 1)[0]

    def close(self) -> None:
        self.store.close()


PLAIN = "plain_events"
_COLUMNS = "position, id, stream_id, version, type, data"


class PlainPostgres(Side):
    name = "plain table"

    def __init__(self, url: str, schema_name: str) -> None:
        self.url = url
        self.schema = schema_name
        self.conn = psycopg.connect(url, autocommit=True)
        set_json_loads(orjson.loads, self.conn)
        self.conn.execute(f"SET search_path TO {schema_name}")
        self.conn.execute(
            f"CREATE TABLE IF NOT EXISTS {PLAIN} ("
            "position bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
            'id uuid NOT NULL UNIQUE, stream_id text COLLATE "C" NOT NULL, '
            "version bigint NOT NULL, type text NOT NULL, data jsonb NOT NULL, "
            "UNIQUE (stream_id, version))"
        )
        self._insert = (
            f"INSERT INTO {PLAIN} (id, stream_id, version, type, data) "
            "VALUES (%s, %s, %s, %s, %s::jsonb)"
        )

    def append_stream(self, stream_id: str, events: Events) -> None:
        copy_rows = f"COPY {PLAIN} (id, stream_id, version, type, data) FROM STDIN"
        with self.conn.transaction(), self.conn.cursor() as cursor, cursor.copy(copy_rows) as copy:
            for n, (type_, data) in enumerate(events):
                copy.write_row(
                    (new_event_id(), stream_id, n + 1, type_, orjson.dumps(data).decode())
                )

    def append_one(self, stream_id: str, version: int, data: dict[str, Any]) -> None:
        self.conn.execute(
            self._insert,
            (new_event_id(), stream_id, version, "Deposited", orjson.dumps(data).decode()),
        )

    def load_stream(self, stream_id: str) -> int:
        query = f"SELECT {_COLUMNS} FROM {PLAIN} WHERE stream_id = %s ORDER BY version"
        return len(self.conn.execute(query, (stream_id,)).fetchall())

    def global_page(self, after: int, limit: int = PAGE) -> int:
        query = f"SELECT {_COLUMNS} FROM {PLAIN} WHERE position > %s ORDER BY position LIMIT %s"
        return len(self.conn.execute(query, (after, limit)).fetchall())

    def category_page(self, category: str, after: int) -> int:
        raise NotImplementedError("the plain table has no categories")

    def size_bytes(self) -> int:
        return postgres_bytes(self.url, self.schema)

    def settle(self) -> None:
        analyze(self.url, self.schema)

    def close(self) -> None:
        self.conn.close()


class PlainSQLite(Side):
    name = "plain table"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        # The journal and durability our store runs with: WAL, SQLite's default sync.
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute(
            f"CREATE TABLE IF NOT EXISTS {PLAIN} (position INTEGER PRIMARY KEY, "
            "id BLOB NOT NULL UNIQUE, stream_id TEXT NOT NULL, version INTEGER NOT NULL, "
            "type TEXT NOT NULL, data TEXT NOT NULL, UNIQUE (stream_id, version))"
        )
        self._insert = (
            f"INSERT INTO {PLAIN} (id, stream_id, version, type, data) VALUES (?, ?, ?, ?, ?)"
        )

    def append_stream(self, stream_id: str, events: Events) -> None:
        rows = [
            (new_event_id().bytes, stream_id, n + 1, type_, orjson.dumps(data).decode())
            for n, (type_, data) in enumerate(events)
        ]
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.executemany(self._insert, rows)
        self.conn.execute("COMMIT")

    def append_one(self, stream_id: str, version: int, data: dict[str, Any]) -> None:
        row = (new_event_id().bytes, stream_id, version, "Deposited", orjson.dumps(data).decode())
        self.conn.execute(self._insert, row)

    def load_stream(self, stream_id: str) -> int:
        query = f"SELECT {_COLUMNS} FROM {PLAIN} WHERE stream_id = ? ORDER BY version"
        return len(_decoded(self.conn.execute(query, (stream_id,)).fetchall()))

    def global_page(self, after: int, limit: int = PAGE) -> int:
        query = f"SELECT {_COLUMNS} FROM {PLAIN} WHERE position > ? ORDER BY position LIMIT ?"
        return len(_decoded(self.conn.execute(query, (after, limit)).fetchall()))

    def category_page(self, category: str, after: int) -> int:
        raise NotImplementedError("the plain table has no categories")

    def size_bytes(self) -> int:
        return sqlite_bytes(self.path)

    def close(self) -> None:
        self.conn.close()


def _decoded(rows: list[Any]) -> list[tuple[Any, ...]]:
    """The rows with their JSON decoded, as psycopg's loader does on PostgreSQL."""
    loads = orjson.loads
    return [(*row[:5], loads(row[5])) for row in rows]


def postgres_bytes(server: str, schema_name: str) -> int:
    """The tables of `schema_name` with their indexes and TOAST, in bytes."""
    with psycopg.connect(server) as conn:
        row = conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind = 'r'",
            (schema_name,),
        ).fetchone()
    return int(row[0]) if row else 0


def analyze(server: str, schema_name: str) -> None:
    """Statistics of the tables of `schema_name`, as autovacuum gathers them in time: a
    freshly filled log may go long without, and plans made on none may read it whole."""
    with psycopg.connect(server, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT c.oid::regclass::text FROM pg_class c JOIN pg_namespace n "
            "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
            (schema_name,),
        ).fetchall()
        for (table,) in tables:
            conn.execute(f"ANALYZE {table}".encode())


def sqlite_bytes(path: Path) -> int:
    """The pages of the database file in use, once the write-ahead log is folded in."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    finally:
        conn.close()
    return int((pages - free) * size)


def open_sides(backend: str, prefix: str, folder: Path, server: str = PG) -> tuple[Side, Side]:
    """Our store and the plain table on `backend`, each new and empty: in schemas
    `{prefix}_ours` and `{prefix}_plain` on the PostgreSQL `server`, or in files so named
    in `folder`."""
    if backend == "postgresql":
        ours, plain = f"{prefix}_ours", f"{prefix}_plain"
        with psycopg.connect(server, autocommit=True) as conn:
            for name in (ours, plain):
                conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
                conn.execute(f"CREATE SCHEMA {name}")
        # A name of its own: tests that drop the store's connections (application_name
        # 'eventcraft') on a shared server leave a long run alone.
        url = f"{server}?schema={ours}&application_name=eventcraft_bench"
        return Ours(url, server), PlainPostgres(server, plain)
    for name in (f"{prefix}_ours.db", f"{prefix}_plain.db"):
        for suffix in ("", "-wal", "-shm"):
            (folder / (name + suffix)).unlink(missing_ok=True)
    return Ours(f"sqlite:///{folder / f'{prefix}_ours.db'}"), PlainSQLite(
        folder / f"{prefix}_plain.db"
    )
