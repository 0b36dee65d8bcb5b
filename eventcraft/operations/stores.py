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

from . import tenants
from .errors import InputError, NotFound

_ONLY_IMPORT = "check the URL (only import creates a store)"


def open_store(url: str, *, create: bool = False) -> EventStore:
    """The store at `url`; `NotFound` for a database that holds no event store (a SQLite
    file that is not there, another program's file, a PostgreSQL schema without the
    store's tables), unless `create`: the backend then creates what is missing.

    A URL with `{tenant}` opens one tenant's store, the one its `?tenant=` names (its
    database or folder made only with `create`); without `?tenant=` it is refused."""
    tenant = tenants.tenant_option(url)
    if tenant is not None:
        template = tenants.template_of(url)
        place = tenants.place_of(template, tenant)  # InvalidTenant, InputError
        if not create:
            if tenant not in tenants.list_tenants(template):
                raise NotFound(
                    f"there is no tenant {tenant!r} in {redacted(template)!r}: its "
                    f"{place.kind} {place.name} is not there: {_ONLY_IMPORT}"
                )
            if place.kind != "shared":  # side by side, the tenant's row is its store
                _require_store(place.url)
        return EventStore.open(url, create_folders=create)
    if tenants.is_template(url):
        raise InputError(
            f"{redacted(url)!r} names a store per tenant with {{tenant}}: say which tenant's "
            "store to open"
        )
    if not create:
        _require_store(url)
    return EventStore.open(url, create_folders=create)


def _require_store(url: str) -> None:
    """`NotFound` unless the database of `url` holds an event store."""
    scheme = scheme_of(url)  # UnsupportedStoreURL, as EventStore.open
    if scheme == "postgresql":
        target = PostgresTarget.from_url(url)  # UnsupportedStoreURL, as EventStore.open
        _require_postgres_store(url, target)
    elif scheme == "sqlite":
        path = _sqlite_file(url)
        if path is not None:
            _require_sqlite_store(path)


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
