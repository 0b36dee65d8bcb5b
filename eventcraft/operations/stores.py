"""Opening the store a shell was pointed at: a database that holds no event store is
made one only by a command that writes, so a mistyped path, database or schema is an
error, not an empty store (the backends create their tables on opening, wherever
they are pointed).

The URL's own mistakes (a parameter libpq does not know, a port out of range) are
input errors `PostgresTarget.from_url` finds before anything connects.
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing

from eventcraft.eventstore import (
    EventStore,
    PostgresTarget,
    SQLiteTarget,
    StoreUnavailable,
    redacted,
    scheme_of,
)
from eventcraft.eventstore.arguments import opening
from eventcraft.eventstore.postgres.connections import ConnectionPool
from eventcraft.eventstore.schema import EVENTS

from .errors import NotFound

_ONLY_IMPORT = "check the URL (only import creates a store)"


def open_store(url: str, *, create: bool = False) -> EventStore:
    """The store at `url`; `NotFound` for a database that holds no event store (a SQLite
    file that is not there, another program's file, a PostgreSQL schema without the
    store's tables), unless `create`: the backend then creates what is missing."""
    scheme = scheme_of(url)  # UnsupportedStoreURL, as EventStore.open
    if scheme == "postgresql":
        target = PostgresTarget.from_url(url)  # UnsupportedStoreURL, as EventStore.open
        if not create:
            _require_postgres_store(url, target)
    elif scheme == "sqlite":
        path = _sqlite_file(url)
        if path is not None and not create:
            _require_sqlite_store(path)
    return EventStore.open(url, create_folders=create)


def is_memory(url: str) -> bool:
    """Whether `url` names a store kept only as long as the process that opened it."""
    return scheme_of(url) == "memory"


def _require_postgres_store(url: str, target: PostgresTarget) -> None:
    table = EVENTS if target.schema is None else f"{target.schema}.{EVENTS}"
    with opening(url):  # StoreUnavailable naming the URL, as EventStore.open
        conn = ConnectionPool(target).connect()
    with conn:
        # A schema the role may not use is not looked in (that is refused): the open names
        # the USAGE the role lacks.
        row = conn.execute(
            "SELECT CASE WHEN EXISTS (SELECT FROM pg_namespace WHERE nspname = %s "
            "AND NOT has_schema_privilege(oid, 'USAGE')) THEN true "
            "ELSE to_regclass(%s) IS NOT NULL END",
            (target.schema, table),
        ).fetchone()
    if not (row and row[0]):
        where = "the search path" if target.schema is None else f"schema {target.schema!r}"
        raise NotFound(f"no event store in {where} at {redacted(url)!r}: {_ONLY_IMPORT}")


def _require_sqlite_store(path: str) -> None:
    if not os.path.exists(path):
        raise NotFound(f"no SQLite store at {path!r}: check the path (only import creates a store)")
    # Read-only: a look must not turn another program's file (or an empty one) into a
    # database, nor leave a journal beside it.
    try:
        with closing(sqlite3.connect(f"file:{_uri_path(path)}?mode=ro", uri=True)) as look:
            found = look.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (EVENTS,)
            ).fetchone()
    except sqlite3.OperationalError as error:  # cannot be opened: a folder, no permission
        raise StoreUnavailable(f"cannot open the event store at {path!r}: {error}") from None
    except sqlite3.DatabaseError:  # not a SQLite file at all
        found = None
    if found is None:
        raise NotFound(f"no event store in the SQLite file {path!r}: {_ONLY_IMPORT}")


def _uri_path(path: str) -> str:
    """`path` as the path of a `file:` URI: `?` and `#` would end it, `%` escape."""
    return path.replace("%", "%25").replace("?", "%3f").replace("#", "%23")


def _sqlite_file(url: str) -> str | None:
    """The file a `sqlite:///` URL names, absolute; None for `:memory:`."""
    path = SQLiteTarget.from_url(url).path  # UnsupportedStoreURL, as EventStore.open
    return None if path == ":memory:" else os.path.abspath(path)
