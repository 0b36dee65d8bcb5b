"""Where read models and checkpoints live: any database SQLAlchemy reaches.

By default that is the store's own database, so a read model can be joined
with nothing else running. A batch's read-model changes and its checkpoint
commit in one transaction of this database, wherever it is.
"""

from __future__ import annotations

import sqlite3
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import sqlalchemy as sa
from eventcraft.eventstore import EventStore, PostgresTarget, tenant_place
from sqlalchemy.pool import StaticPool

from .errors import DefinitionError

_beside_memory_stores: weakref.WeakKeyDictionary[EventStore, Database] = weakref.WeakKeyDictionary()
_BUSY_TIMEOUT_MS = 60_000
_READING = "eventcraft_reading"


class Database:
    """A SQLAlchemy engine whose transactions are safe to fence a checkpoint with.

    On SQLite every transaction takes the write lock when it begins (BEGIN
    IMMEDIATE): two projectors never interleave, and neither fails half-way
    for having started as a reader.

    Example::

        import sqlalchemy as sa
        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections import (
            Database, ProjectionRunner, Subscription, checkpoint_positions,
        )

        read_models = Database(sa.create_engine("sqlite:///read_models.db"))  # not the store's
        store = EventStore.open("sqlite:///shop.db")
        store.append("order-1", [NewEvent("OrderPaid", {"cents": 900})])
        receipts = Subscription("receipts", lambda event: None)
        with ProjectionRunner(store, [receipts], database=read_models) as runner:
            runner.catch_up()
        assert checkpoint_positions(read_models, ["receipts"]) == {"receipts": 1}
        with read_models.reading() as connection:  # a read-only transaction
            assert "eventcraft_projections" in sa.inspect(connection).get_table_names()
        read_models.close()
        store.close()
    """

    def __init__(self, engine: sa.Engine, *, keep_open: bool = False) -> None:
        if not isinstance(engine, sa.Engine):
            raise DefinitionError(f"a read-model database is a sqlalchemy Engine, not {engine!r}")
        self.engine = engine
        self.dialect = engine.dialect.name
        self._keep_open = keep_open
        # One in-memory SQLite connection is shared by every thread: one
        # transaction at a time.
        self._serial = threading.RLock() if isinstance(engine.pool, StaticPool) else None
        if self.dialect == "sqlite":
            _begin_immediately(engine)

    @classmethod
    def of(cls, database: Database | sa.Engine | str | None, store: EventStore) -> Database:
        """`database` as a Database; None means the store's own database.

        A memory store's "own database" is an in-memory SQLite one that lives
        as long as the store, so runners started one after another share it.
        """
        if isinstance(database, Database):
            return database
        if isinstance(database, sa.Engine):
            return cls(database)
        if database is None and store.url.lower().startswith("memory:"):
            found = _beside_memory_stores.get(store)
            if found is None:
                # Closed with the store, not by the runners that come and go.
                found = cls(engine_for(store.url), keep_open=True)
                _beside_memory_stores[store] = found
            return found
        return cls(engine_for(store.url if database is None else database))

    @contextmanager
    def transaction(self) -> Iterator[sa.Connection]:
        """A transaction that may write; committed on success, rolled back on error."""
        with self._exclusive(), self.engine.begin() as connection:
            yield connection

    @contextmanager
    def reading(self) -> Iterator[sa.Connection]:
        """A read-only look that takes no write lock (SQLite)."""
        with self._exclusive(), self.engine.connect() as connection:
            connection = connection.execution_options(**{_READING: True})
            with connection.begin():
                yield connection

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        if self._serial is None:
            yield
            return
        with self._serial:
            yield

    def truncate_wal(self) -> bool:
        """On SQLite, move what the WAL holds into the database file and empty it, so that
        what was overwritten (an erasure's old text) is kept in neither; False if readers
        kept the checkpoint from finishing (the next one completes it). Elsewhere, True:
        there is no such file to empty."""
        if self.dialect != "sqlite":
            return True
        with self._exclusive():
            raw = self.engine.raw_connection()
            try:
                # Outside any transaction, as a checkpoint must be (the driver's autocommit).
                cursor = raw.cursor()
                cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                row = cursor.fetchone()
                return not (row and row[0])
            finally:
                raw.close()

    def close(self) -> None:
        if not self._keep_open:
            self.engine.dispose()


def engine_for(url: str) -> sa.Engine:
    """An engine for a store URL (memory://, sqlite:///..., postgresql://...?schema=...).

    Any other SQLAlchemy URL is used as it is. A tenant's store URL (`?tenant=` in a
    template) is its place's: never a file or schema named by the template's text.
    """
    place = tenant_place(url) if "://" in url else None
    if place is not None:
        url = place.url
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme == "memory":
        return sa.create_engine(
            "sqlite://", poolclass=StaticPool, connect_args={"check_same_thread": False}
        )
    if scheme == "sqlite":
        return sa.create_engine(url.split("?", 1)[0], connect_args={"timeout": 60})
    if scheme in ("postgresql", "postgres", "postgresql+psycopg"):
        # The store's own reading of the URL: `?schema=` checked and set as search_path,
        # and its pool's bounds, which an operator sets for every connection the
        # application opens under that URL (a role may allow only so many).
        target = PostgresTarget.from_url(url)
        plain = "postgresql+psycopg" + target.conninfo.removeprefix("postgresql")
        # Behind a transaction pooler, READ COMMITTED goes in each BEGIN (the store's
        # `options` would be refused): `_behind_pooler` sets the rest.
        isolation = {"isolation_level": "READ COMMITTED"} if target.pooler == "transaction" else {}
        engine = sa.create_engine(
            plain,
            connect_args=target.connect_arguments(),
            pool_pre_ping=True,
            pool_size=target.pool_size,
            max_overflow=0,
            pool_timeout=target.pool_timeout,
            **isolation,
        )
        _behind_pooler(engine, target)
        return engine
    return sa.create_engine(url)


def _behind_pooler(engine: sa.Engine, target: PostgresTarget) -> None:
    """Give `engine`'s connections the store's settings where a pooler refuses them as
    libpq's `options`: once a connection opens (a session pooler's are the client's; a
    transaction pooler such as PgBouncer keeps the time zone for each client), and behind
    a transaction pooler the schema in each transaction (`SET LOCAL`), whose server
    connection is another client's after it."""
    settings = target.session_settings()
    if settings is not None:

        def settle(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.execute(settings)
            dbapi_connection.commit()

        sa.event.listen(engine, "connect", settle)
    if target.pooler == "transaction" and target.schema is not None:
        path = f'SET LOCAL search_path TO "{target.schema}"'

        def scope(connection: sa.Connection) -> None:
            connection.exec_driver_sql(path)

        sa.event.listen(engine, "begin", scope)


def _write_ahead(dbapi_connection: Any) -> None:
    """Put a SQLite file in WAL mode, as the event store keeps its file: read models made
    first in a store's file (a tenant's, before its store opened) would leave it in
    rollback mode, where a runner's reads block the store's opening, which must take the
    file whole to switch it, for the busy timeout (a minute) and then fail."""
    (mode,) = dbapi_connection.execute("PRAGMA journal_mode").fetchone()
    if mode.lower() in ("wal", "memory"):
        return
    with suppress(sqlite3.OperationalError):  # a read-only file is read as it is
        dbapi_connection.execute("PRAGMA journal_mode = WAL")


def _begin_immediately(engine: sa.Engine) -> None:
    @sa.event.listens_for(engine, "connect")
    def connect(dbapi_connection: Any, record: Any) -> None:
        # Let SQLAlchemy's begin (below) open transactions, not the driver.
        dbapi_connection.isolation_level = None
        dbapi_connection.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
        _write_ahead(dbapi_connection)
        # What is deleted or overwritten (a read model's old generation, a forgotten
        # subject's parked error or failed message) is zeroed, not left in free pages.
        dbapi_connection.execute("PRAGMA secure_delete = ON")

    @sa.event.listens_for(engine, "begin")
    def begin(connection: sa.Connection) -> None:
        reading = connection.get_execution_options().get(_READING, False)
        connection.exec_driver_sql("BEGIN" if reading else "BEGIN IMMEDIATE")
