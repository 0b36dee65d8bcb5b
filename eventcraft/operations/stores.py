"""Opening the store a shell was pointed at: a database that holds no event store is
made one only by a command that writes, so a mistyped path, database or schema is an
error, not an empty store (the backends create their tables on opening, wherever
they are pointed).

The URL's own mistakes (a parameter libpq does not know, a port out of range) are
input errors `PostgresTarget.from_url` finds before anything connects.
"""

from __future__ import annotations

import os

from eventcraft.eventstore import (
    EventStore,
    PostgresTarget,
    SQLiteTarget,
    postgres_holds_store,
    redacted,
    scheme_of,
    sqlite_file_holds_store,
)

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
    if not postgres_holds_store(url, target):
        where = "the search path" if target.schema is None else f"schema {target.schema!r}"
        raise NotFound(f"no event store in {where} at {redacted(url)!r}: {_ONLY_IMPORT}")


def _require_sqlite_store(path: str) -> None:
    if not os.path.exists(path):
        raise NotFound(f"no SQLite store at {path!r}: check the path (only import creates a store)")
    if not sqlite_file_holds_store(path):
        raise NotFound(f"no event store in the SQLite file {path!r}: {_ONLY_IMPORT}")


def _sqlite_file(url: str) -> str | None:
    """The file a `sqlite:///` URL names, absolute; None for `:memory:`."""
    path = SQLiteTarget.from_url(url).path  # UnsupportedStoreURL, as EventStore.open
    return None if path == ":memory:" else os.path.abspath(path)
