"""Which backend a store URL names: the one place a URL's scheme is read.

Each kind of backend is a `BackendKind` registered under the schemes its URLs begin
with: how to open its sync backend and its async one, where it keeps its keys, and
how it runs retention. `EventStore.open`, `AsyncEventStore.open`, `KeyStore.open`
and the store's retention all ask here, so a backend a third party writes is opened
by every one of them once it is registered::

    register_backend(BackendKind(name="mydb", open=MyBackend.from_url), "mydb")
    EventStore.open("mydb://...")

A kind that gives no async backend runs its sync one on a worker thread; one that
gives no key table or retention keeps keys in memory and has no retention.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Protocol

from .arguments import redacted
from .async_port import AsyncBackend
from .async_threaded import ThreadedBackend
from .errors import StoreUnavailable, UnsupportedStoreURL
from .memory import MemoryBackend
from .personal.key_table import KeyTable, MemoryKeyTable
from .port import Backend
from .postgres import replicas as postgres_replicas
from .postgres.async_backend import AsyncPostgresBackend
from .postgres.async_tenant_rows import AsyncSideBySideBackend
from .postgres.backend import PostgresBackend
from .postgres.key_table import PostgresKeyTable
from .postgres.retention import PostgresRetention
from .postgres.side_by_side import is_side_by_side
from .postgres.side_by_side_keys import TenantKeyTable
from .postgres.tenant_rows import SideBySideBackend
from .retention import NoRetention, Retention
from .sqlite.backend import SQLiteBackend
from .sqlite.key_table import SQLiteKeyTable
from .sqlite.options import PREFIX as SQLITE_PREFIX
from .sqlite.retention import SQLiteRetention


class Opener(Protocol):
    """Opens a sync backend for a URL: `open(url, group_commit=..., create_folders=...)`."""

    def __call__(self, url: str, *, group_commit: bool, create_folders: bool) -> Backend: ...


class AsyncOpener(Protocol):
    """Opens an async backend for a URL, as `Opener` does a sync one."""

    def __call__(
        self, url: str, *, group_commit: bool, create_folders: bool
    ) -> Awaitable[AsyncBackend]: ...


@dataclass(frozen=True, slots=True)
class BackendKind:
    """One kind of backend, as `register_backend` takes it.

    Only `name` and `open` are needed. Without `open_async`, `AsyncEventStore` runs the
    sync backend on a worker thread. Without `key_table`, the keys that seal personal
    fields live in the process's memory: a store whose events outlive the process needs
    one, or after a restart its events with personal fields are `UnreadablePersonalData`.

    Example::

        from eventcraft.eventstore import Backend, BackendKind

        def open_mydb(url: str, *, group_commit: bool, create_folders: bool) -> Backend:
            ...  # connect, and return your Backend subclass over the connection

        kind = BackendKind(name="mydb", open=open_mydb)
        assert (kind.open_async, kind.key_table, kind.retention) == (None, None, None)
    """

    name: str
    """What `scheme_of` answers for its URLs ("sqlite", "postgresql", ...)."""
    open: Opener
    """Opens its sync backend."""
    open_async: AsyncOpener | None = None
    """Opens its async backend; None runs the sync one on a worker thread."""
    key_table: Callable[[str, bool], KeyTable] | None = None
    """The key table at a URL (the flag: only one that exists); None keeps keys in memory."""
    retention: Callable[[str], Retention] | None = None
    """The retention of the store at a URL; None: the store has none (`NoRetention`)."""


_KINDS: dict[str, BackendKind] = {}


def register_backend(kind: BackendKind, *schemes: str) -> None:
    """Open URLs that begin with each of `schemes` (followed by `://`) with `kind`; a
    scheme registered before is taken over.

    For the life of the process: there is no unregistering.

    Example::

        from eventcraft.eventstore import Backend, BackendKind, register_backend, scheme_of

        def open_mydb(url: str, *, group_commit: bool, create_folders: bool) -> Backend:
            ...  # connect, and return your Backend subclass over the connection

        register_backend(BackendKind(name="mydb", open=open_mydb), "mydb", "mydb+tls")
        assert scheme_of("mydb+tls://db.example/orders") == "mydb"
    """
    if not schemes:
        raise ValueError(f"register_backend({kind.name!r}) names no URL scheme")
    for scheme in schemes:
        _KINDS[scheme.lower()] = kind


def kind_of(url: object) -> BackendKind:
    """The kind of backend a store URL names, or `UnsupportedStoreURL`."""
    if not isinstance(url, str):
        raise UnsupportedStoreURL(f"a store URL must be a str, not {type(url).__name__}")
    if "\x00" in url:
        raise UnsupportedStoreURL(
            f"a store URL must not contain a NUL character: {redacted(url)!r}"
        )
    kind = _KINDS.get(_scheme(url))
    if kind is None:
        raise UnsupportedStoreURL(
            f"no backend for {redacted(url)!r}: use sqlite:///PATH, postgresql://... or memory://"
        )
    return kind


def scheme_of(url: object) -> str:
    """The backend a store URL names ("memory", "sqlite", "postgresql", or the name of a
    kind registered since), or raise `UnsupportedStoreURL`, its password masked.

    Example::

        from eventcraft.eventstore import UnsupportedStoreURL, scheme_of

        assert scheme_of("sqlite:///shop.db") == "sqlite"
        assert scheme_of("postgres://app@db.example/shop") == "postgresql"
        try:
            scheme_of("mysql://app:s3cret@db.example/shop")
        except UnsupportedStoreURL as error:
            refused = str(error)
        assert "'mysql://app:***@db.example/shop'" in refused
    """
    return kind_of(url).name


def backend_for(url: str, *, group_commit: bool = True, create_folders: bool = False) -> Backend:
    """A new synchronous backend for the store at `url`."""
    return kind_of(url).open(url, group_commit=group_commit, create_folders=create_folders)


async def async_backend_for(
    url: str, *, group_commit: bool = True, create_folders: bool = False
) -> AsyncBackend:
    """A new async backend for the store at `url`."""
    kind = kind_of(url)
    if kind.open_async is not None:
        return await kind.open_async(url, group_commit=group_commit, create_folders=create_folders)
    opened = partial(kind.open, url, group_commit=group_commit, create_folders=create_folders)
    return ThreadedBackend(await asyncio.to_thread(opened))


def key_table_for(url: str, *, existing: bool = False) -> KeyTable:
    """The key table at a store URL; with `existing`, a SQLite file that is not there is
    `StoreUnavailable`."""
    if not isinstance(url, str):
        raise UnsupportedStoreURL(f"a key store URL is a str, not {url!r}")
    kind = _KINDS.get(_scheme(url))
    if kind is None:
        raise UnsupportedStoreURL(
            "a key store URL is sqlite:///, postgresql:// or memory://, "
            f"not {url.split('://')[0]!r}"
        )
    return MemoryKeyTable() if kind.key_table is None else kind.key_table(url, existing)


def retention_for(url: str) -> Retention:
    """The retention of the store at `url`: its own connection, opened when first used."""
    kind = _KINDS.get(_scheme(url))
    if kind is None or kind.retention is None:
        return NoRetention()
    return kind.retention(url)


def with_replicas(url: str, replicas: Sequence[str]) -> str:
    """`url` naming `replicas` as its read replicas (`?replica=`): PostgreSQL's alone."""
    if kind_of(url).name != "postgresql":
        raise UnsupportedStoreURL(
            f"replicas= is for PostgreSQL stores (hot standbys), not {redacted(url)!r}"
        )
    return postgres_replicas.with_replicas(url, replicas)


def _scheme(url: str) -> str:
    return url.split(":", 1)[0].lower() if "://" in url else ""


def _open_memory(url: str, *, group_commit: bool, create_folders: bool) -> Backend:
    return MemoryBackend.from_url(url)


async def _open_memory_async(url: str, *, group_commit: bool, create_folders: bool) -> AsyncBackend:
    # In place: a memory backend never blocks, so no thread is worth its hand-over.
    return ThreadedBackend(MemoryBackend.from_url(url), in_place=True)


def _open_postgres(url: str, *, group_commit: bool, create_folders: bool) -> Backend:
    if is_side_by_side(url):  # one tenant's part of tables shared by tenants
        return SideBySideBackend.from_url(url, group_commit=group_commit)
    return PostgresBackend.from_url(url, group_commit=group_commit)


async def _open_postgres_async(
    url: str, *, group_commit: bool, create_folders: bool
) -> AsyncBackend:
    if is_side_by_side(url):
        return await AsyncSideBySideBackend.open(url, group_commit=group_commit)
    return await AsyncPostgresBackend.open(url, group_commit=group_commit)


def _postgres_key_table(url: str, existing: bool) -> KeyTable:
    return TenantKeyTable(url) if is_side_by_side(url) else PostgresKeyTable(url)


def _postgres_retention(url: str) -> Retention:
    # Tenants side by side have no retention yet: their events stay.
    return NoRetention() if is_side_by_side(url) else PostgresRetention(url)


def _sqlite_path(url: str) -> str:
    return url[len(SQLITE_PREFIX) :].split("?", 1)[0] if url.startswith(SQLITE_PREFIX) else ""


def _sqlite_key_table(url: str, existing: bool) -> KeyTable:
    path = _sqlite_path(url)
    if not path:
        raise UnsupportedStoreURL(f"a SQLite key store URL is sqlite:///path.db, not {url!r}")
    # A separate connection cannot see an in-memory database: keep its keys here.
    if path == ":memory:":
        return MemoryKeyTable()
    if existing and not Path(path).is_file():
        raise StoreUnavailable(
            f"key store {url}: there is no file {path} (a key store's file is made when "
            "data is first sealed with it: is the path right?)"
        )
    return SQLiteKeyTable(path)


def _sqlite_retention(url: str) -> Retention:
    path = _sqlite_path(url)
    return SQLiteRetention(path) if path and path != ":memory:" else NoRetention()


register_backend(
    BackendKind(name="memory", open=_open_memory, open_async=_open_memory_async), "memory"
)
register_backend(
    BackendKind(
        name="sqlite",
        open=SQLiteBackend.from_url,
        key_table=_sqlite_key_table,
        retention=_sqlite_retention,
    ),
    "sqlite",
)
register_backend(
    BackendKind(
        name="postgresql",
        open=_open_postgres,
        open_async=_open_postgres_async,
        key_table=_postgres_key_table,
        retention=_postgres_retention,
    ),
    "postgresql",
    "postgres",
    "postgresql+psycopg",
)
