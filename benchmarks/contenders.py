"""What the store benchmark compares: our store, the `eventsourcing` library, raw psycopg.

Each contender lives in a PostgreSQL schema of its own and offers the same
four operations, so the runner can interleave them round by round.
"""

from __future__ import annotations

import abc
import os
import time
import uuid
from typing import Any

import orjson
import psycopg
from eventcraft.eventstore import EventStore, NewEvent
from eventcraft.eventstore.postgres.schema import ddl
from eventcraft.eventstore.sql import schema
from psycopg.types.json import set_json_loads

PG = os.environ.get("EVENTCRAFT_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")
NOTE = "n" * 180  # with the other fields, about 230 bytes of JSON per event


def payload(n: int) -> dict[str, Any]:
    return {"amount_cents": n, "currency": "EUR", "note": NOTE}


def library_env(schema: str, **settings: str) -> dict[str, str]:
    """The `eventsourcing` library's settings for its PostgreSQL recorder in `schema`."""
    parts = psycopg.conninfo.conninfo_to_dict(PG)
    return {
        "PERSISTENCE_MODULE": "eventsourcing.postgres",
        "POSTGRES_DBNAME": str(parts.get("dbname", "test")),
        "POSTGRES_HOST": str(parts.get("host", "127.0.0.1")),
        "POSTGRES_PORT": str(parts.get("port", "5432")),
        "POSTGRES_USER": str(parts.get("user", "postgres")),
        "POSTGRES_PASSWORD": str(parts.get("password", "unused")),
        "POSTGRES_SCHEMA": schema,
        **settings,
    }


def reset_schema(name: str) -> None:
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
        conn.execute(f"CREATE SCHEMA {name}")


class Contender(abc.ABC):
    name: str
    schema: str
    create_tables = True

    @abc.abstractmethod
    def open(self) -> None:
        """Connect; called once in every process that uses the contender."""

    @abc.abstractmethod
    def new_streams(self, count: int) -> list[Any]:
        """Create `count` streams holding one event each; handles for `append_one`."""

    @abc.abstractmethod
    def append_one(self, stream: Any, n: int) -> None:
        """One event, one transaction, to an existing stream."""

    @abc.abstractmethod
    def append_batch(self, size: int) -> None:
        """`size` events in one transaction, to a new stream."""

    @abc.abstractmethod
    def scan(self) -> int:
        """Read and decode the whole global log; the number of events."""

    @abc.abstractmethod
    def close(self) -> None: ...


class Ours(Contender):
    name = "eventcraft"
    schema = "bench_ours"

    def open(self) -> None:
        self.store = EventStore.open(f"{PG}?schema={self.schema}")

    def new_streams(self, count: int) -> list[Any]:
        streams: list[Any] = []
        for _ in range(count):
            stream_id = f"account-{uuid.uuid4().hex}"
            self.store.append(stream_id, [NewEvent("Opened", payload(0))], 0)
            streams.append([stream_id, 1])
        return streams

    def append_one(self, stream: Any, n: int) -> None:
        stream[1] = self.store.append(
            stream[0], [NewEvent("Deposited", payload(n))], stream[1]
        ).version

    def append_batch(self, size: int) -> None:
        events = [NewEvent("Deposited", payload(n)) for n in range(size)]
        self.store.append(f"account-{uuid.uuid4().hex}", events, 0)

    def scan(self) -> int:
        count = 0
        for _ in self.store.read_all():
            count += 1
        return count

    def close(self) -> None:
        self.store.close()


class Raw(Contender):
    """Plain statements on a table of our shape: the floor any store pays."""

    name = "raw psycopg"
    schema = "bench_raw"
    lock_table = False
    _columns = "stream_id, version, id, type, data, metadata, recorded_at, category"

    def open(self) -> None:
        self.conn = psycopg.connect(PG, autocommit=True, options=f"-c search_path={self.schema}")
        set_json_loads(orjson.loads, self.conn)
        exists = self.conn.execute("SELECT to_regclass(%s)", (schema.EVENTS,)).fetchone()
        if exists and exists[0] is None:
            for statement in ddl():
                if statement.lstrip().startswith(("CREATE TABLE", "CREATE INDEX", "CREATE SEQ")):
                    self.conn.execute(statement.encode())
            self.conn.execute(
                f"ALTER TABLE {schema.EVENTS} ALTER COLUMN position "
                f"SET DEFAULT nextval('{schema.POSITION_SEQUENCE}')"
            )
        self._insert = (
            f"INSERT INTO {schema.EVENTS} ({self._columns}) "
            "VALUES (%s, %s, %s, %s, %s::jsonb, %s::jsonb, now(), 'account')"
        )

    def _row(self, stream_id: str, version: int, n: int) -> tuple[Any, ...]:
        return (
            stream_id,
            version,
            uuid.uuid4(),
            "Deposited",
            orjson.dumps(payload(n)).decode(),
            "{}",
        )

    def new_streams(self, count: int) -> list[Any]:
        streams = [[f"account-{uuid.uuid4().hex}", 0] for _ in range(count)]
        for stream in streams:
            self.append_one(stream, 0)
        return streams

    def append_one(self, stream: Any, n: int) -> None:
        stream[1] += 1
        if self.lock_table:
            with self.conn.transaction():
                self.conn.execute(f"LOCK TABLE {schema.EVENTS} IN EXCLUSIVE MODE")
                self.conn.execute(self._insert, self._row(stream[0], stream[1], n))
        else:
            self.conn.execute(self._insert, self._row(stream[0], stream[1], n))

    def append_batch(self, size: int) -> None:
        stream_id = f"account-{uuid.uuid4().hex}"
        with self.conn.transaction(), self.conn.cursor() as cur:
            copy_sql = f"COPY {schema.EVENTS} ({self._columns}) FROM STDIN"
            with cur.copy(copy_sql) as copy:
                for n in range(size):
                    row = self._row(stream_id, n + 1, n)
                    copy.write_row((*row[:6], "now", "account"))

    def scan(self) -> int:
        count = 0
        with self.conn.transaction(), self.conn.cursor(name="scan", binary=True) as cur:
            cur.itersize = 2000
            cur.execute(
                "SELECT id, stream_id, version, position, type, data, metadata, recorded_at "
                f"FROM {schema.EVENTS} ORDER BY position"
            )
            for _ in cur:
                count += 1
        return count

    def close(self) -> None:
        self.conn.close()


class RawLocked(Raw):
    """Raw inserts that each lock the table, as the `eventsourcing` recorder does."""

    name = "raw + table lock"
    schema = "bench_raw_locked"
    lock_table = True


class Library(Contender):
    """The `eventsourcing` library (9.5) through its Application and Aggregate API."""

    name = "eventsourcing 9.5"
    schema = "bench_es"

    def open(self) -> None:
        from eventsourcing.application import Application

        # Its DDL runs on every start; writers starting together fail with
        # "tuple concurrently updated", so only the first opener creates tables.
        env = library_env(self.schema, CREATE_TABLE="y" if self.create_tables else "n")
        self.app: Any = Application(env=env)

    def new_streams(self, count: int) -> list[Any]:
        from .library_aggregate import Account

        accounts = [Account() for _ in range(count)]
        for account in accounts:
            self.app.save(account)
        return accounts

    def append_one(self, stream: Any, n: int) -> None:
        stream.deposit(n, NOTE)
        self.app.save(stream)

    def append_batch(self, size: int) -> None:
        from .library_aggregate import Account

        account = Account()
        for n in range(size - 1):
            account.deposit(n, NOTE)
        self.app.save(account)

    def scan(self) -> int:
        count, start = 0, 1
        while True:
            section = self.app.recorder.select_notifications(start=start, limit=2000)
            for notification in section:
                self.app.mapper.to_domain_event(notification)
                count += 1
            if len(section) < 2000:
                return count
            start = section[-1].id + 1

    def close(self) -> None:
        self.app.close()


CONTENDERS: dict[str, type[Contender]] = {c.name: c for c in (Ours, Library, Raw, RawLocked)}


def concurrent_writer(name: str, appends: int, barrier: Any) -> tuple[float, float]:
    """Run in a worker process: `appends` one-event transactions; (start, end) times."""
    contender = CONTENDERS[name]()
    contender.create_tables = False  # the runner created them before starting the writers
    contender.open()
    streams = contender.new_streams(10)
    barrier.wait()
    started = time.perf_counter()  # CLOCK_MONOTONIC: comparable across processes
    for n in range(appends):
        contender.append_one(streams[n % len(streams)], n)
    ended = time.perf_counter()
    contender.close()
    return started, ended
