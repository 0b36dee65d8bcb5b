"""The PostgreSQL log keeps moving: a gap in positions holds readers back only while an
append that could still fill it is running, never because of other transactions on the
server (in another database, on a user's table, a rebuild's write, a prepared transaction).

Each test makes the gap the way users do, with an append refused for its expected version
(its position is drawn, then never used), and reads from another process.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
import sqlalchemy as sa
from eventcraft.eventstore import NO_STREAM, DuplicateEventId, EventStore, NewEvent
from eventcraft.eventstore.postgres import PostgresTarget, append_functions, high_water
from eventcraft.eventstore.sql import schema
from eventcraft.projections import Projection, ProjectionRunner
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from ..conftest import PG_URL
from ..postgres_server import postgres_server
from ..processes import PROCESSES
from . import gap_readers
from .held_appends import append_uncommitted
from .test_model import machine_on

OTHER_DATABASE = "eventcraft_other"


def _on_database(url: str, database: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{database}", query=""))


@pytest.fixture(scope="module")
def reader() -> Iterator[Executor]:
    """One process that reads, started (and its imports done) before any test holds a gap."""
    with ProcessPoolExecutor(1, mp_context=PROCESSES) as pool:
        pool.submit(time.monotonic).result()
        yield pool


@contextmanager
def _xid_held(conninfo: str, *statements: str) -> Iterator[psycopg.Connection[Any]]:
    """A transaction that has an xid, open until the block ends, then rolled back."""
    with psycopg.connect(conninfo) as conn:
        conn.execute("SELECT txid_current()")
        for statement in statements:
            conn.execute(statement)
        yield conn
        conn.rollback()


@contextmanager
def _xid_in_another_database() -> Iterator[None]:
    with psycopg.connect(PG_URL, autocommit=True) as admin:
        # One database for the server, made by whichever pytest-xdist worker comes first:
        # the lock (held until this connection closes) keeps two from making it at once.
        admin.execute(
            "SELECT pg_advisory_lock(hashtext('eventcraft-tests'), hashtext(%s))", (OTHER_DATABASE,)
        )
        if not admin.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (OTHER_DATABASE,)
        ).fetchone():
            admin.execute(f"CREATE DATABASE {OTHER_DATABASE}")
    with _xid_held(_on_database(PG_URL, OTHER_DATABASE)):
        yield


def _readers_pass_the_gap(
    store: EventStore, url: str, reader: Executor, waiting_api: str = "sync"
) -> None:
    """Make a gap, append past it, and see every kind of reader pass it at once."""
    stream = f"order-{uuid.uuid4().hex[:8]}"
    before = store.high_water_mark()
    placed = NewEvent("A", {})
    first = store.append(stream, [placed], expected_version=NO_STREAM).positions[0]
    with pytest.raises(DuplicateEventId):  # refused by the unique index, its position drawn
        store.append(f"{stream}-again", [NewEvent("B", {}, id=placed.id)])
    ready = PROCESSES.Manager().Event()
    waiter = reader.submit(gap_readers.wait_for_event, url, first, ready, 10.0, waiting_api)
    assert ready.wait(30)
    later = store.append(f"invoice-{uuid.uuid4().hex[:8]}", [NewEvent("C", {})]).positions[0]
    appended_at = time.monotonic()
    assert later == first + 2  # first + 1 was drawn by the refused append: a gap for ever

    woken = waiter.result()
    assert woken["woke"] and woken["positions"] == [later]
    assert woken["at"] - appended_at < 1.0, "the waiting reader was not woken at once"
    seen = reader.submit(gap_readers.read_now, url).result()
    assert seen["read_all"][-2:] == [first, later] and seen["read_all"][0] > 0
    assert seen["high_water_mark"] == later
    assert seen["catch_up"] == seen["read_all"]
    assert store.high_water_mark() == later > before


def test_a_transaction_in_another_database_holds_no_reader_back(
    pg_url: str, reader: Executor
) -> None:
    with EventStore.open(pg_url) as store, _xid_in_another_database():
        _readers_pass_the_gap(store, pg_url, reader)


def test_a_long_write_on_a_users_table_holds_no_reader_back(pg_url: str, reader: Executor) -> None:
    table = f"public.user_orders_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG_URL, autocommit=True) as admin:
        admin.execute(f"CREATE TABLE {table} (id int)")
    try:
        with (
            EventStore.open(pg_url) as store,
            _xid_held(PG_URL, f"INSERT INTO {table} SELECT generate_series(1, 1000)"),
        ):
            _readers_pass_the_gap(store, pg_url, reader)
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as admin:
            admin.execute(f"DROP TABLE {table}")


@pytest.mark.parametrize("waiting_api", ["sync", "async"])
def test_a_long_transaction_holds_no_reader_back_however_much_is_appended_since(
    pg_url: str, reader: Executor, waiting_api: str
) -> None:
    """An idle session left in a transaction (or a long report, or pg_dump) in the store's
    own database, while more is appended than the high-water mark walks in one statement:
    the mark stopped one walk past the transaction's start, and waiting readers slept."""
    with EventStore.open(pg_url) as store, _xid_held(PG_URL):
        for n in range(high_water.WALK // 1_000 + 1):
            store.append(f"busy-{n}", [NewEvent("Busy", {"n": i}) for i in range(1_000)])
        _readers_pass_the_gap(store, pg_url, reader, waiting_api)
        assert store.log_status().held is None


def test_a_prepared_transaction_holds_no_reader_back(reader: Executor) -> None:
    with postgres_server(["max_prepared_transactions=4"]) as server:
        url = f"{server.url}?schema=store"
        with psycopg.connect(server.url, autocommit=True) as admin:
            admin.execute("CREATE TABLE payments (id int)")
        with psycopg.connect(server.url) as conn:
            conn.execute("INSERT INTO payments VALUES (1)")
            conn.execute("PREPARE TRANSACTION 'payment-1'")
        with EventStore.open(url) as store:
            _readers_pass_the_gap(store, url, reader)
        with psycopg.connect(server.url, autocommit=True) as admin:
            admin.execute("ROLLBACK PREPARED 'payment-1'")


def test_a_rebuild_writing_its_read_model_holds_no_reader_back(
    pg_url: str, reader: Executor
) -> None:
    metadata = sa.MetaData()
    rows = sa.Table("gap_rows", metadata, sa.Column("position", sa.BigInteger, primary_key=True))
    writing, release = threading.Event(), threading.Event()
    slow = Projection("gap-rows", tables=[rows])

    @slow.on("Row")
    def write(read_model: Any, event: Any) -> None:
        read_model.execute(sa.insert(read_model[rows]).values(position=event.position))
        writing.set()
        release.wait(30)  # mid-rebuild, with the row written: the transaction has an xid

    with EventStore.open(pg_url) as store, ProjectionRunner(store, [slow]) as runner:
        store.append("row-1", [NewEvent("Row", {})])
        rebuilding = _in_thread(lambda: runner.rebuild("gap-rows"))
        assert writing.wait(30)
        try:
            _readers_pass_the_gap(store, pg_url, reader)
        finally:
            release.set()
            rebuilding.join(30)


def _in_thread(work: Callable[[], object]) -> threading.Thread:
    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("outcome", ["commit", "rollback"])
def test_an_append_in_flight_holds_readers_until_it_ends_and_the_store_names_it(
    pg_url: str, reader: Executor, outcome: str
) -> None:
    target = PostgresTarget.from_url(pg_url)
    with (
        EventStore.open(pg_url) as store,
        psycopg.connect(target.conninfo, options=target.options()) as held,
    ):
        first = store.append("early-1", [NewEvent("Early", {})]).positions[0]
        position = append_uncommitted(held, "held-1")[0]
        later = store.append("later-1", [NewEvent("Later", {})]).positions[0]

        status = store.log_status()
        assert (status.head, status.high_water_mark) == (later, first)
        assert status.held is not None
        assert (status.held.position, status.held.pid) == (position, held.info.backend_pid)
        assert 0 <= status.held.seconds < 60
        assert [e.position for e in store.read_all()] == [first]  # readers wait, as they must

        ready = PROCESSES.Manager().Event()
        waiter = reader.submit(gap_readers.wait_for_event, pg_url, first, ready, 10.0)
        assert ready.wait(30)
        getattr(held, outcome)()
        ended_at = time.monotonic()
        woken = waiter.result()
        assert woken["woke"] and woken["at"] - ended_at < 1.0
        expected = [position, later] if outcome == "commit" else [later]
        assert woken["positions"] == expected
        status = store.log_status()
        assert (status.head, status.high_water_mark, status.held) == (later, later, None)


@pytest.mark.parametrize("api", ["sync", "async"])
def test_a_waiter_past_an_append_in_flight_wakes_for_what_it_can_read(
    pg_url: str, reader: Executor, api: str
) -> None:
    """`wait_for_events(after)` answers whether `read_all(after=after)` has something, as its
    docstring says: a caller past a held gap (at its own append, say) is woken by the next
    event, not left asleep until the append in flight below it ends."""
    target = PostgresTarget.from_url(pg_url)
    with (
        EventStore.open(pg_url) as store,
        psycopg.connect(target.conninfo, options=target.options()) as held,
    ):
        append_uncommitted(held, "held-1")
        mine = store.append("mine-1", [NewEvent("Mine", {})]).positions[0]
        ready = PROCESSES.Manager().Event()
        waiter = reader.submit(gap_readers.wait_for_event, pg_url, mine, ready, 10.0, api)
        assert ready.wait(30)
        reply = store.append("reply-1", [NewEvent("Reply", {})]).positions[0]
        appended_at = time.monotonic()
        woken = waiter.result()
        held.rollback()
    assert woken["woke"] and woken["positions"] == [reply]
    assert woken["at"] - appended_at < 1.0, "the waiter slept though it could read"


@pytest.mark.slow
def test_the_store_behaves_like_its_model_while_another_database_runs_long_transactions(
    pg_url: str,
) -> None:
    with _xid_in_another_database():
        _runs_like_its_model()


@pytest.mark.slow
def test_the_store_behaves_like_its_model_with_short_walks_past_a_long_transaction(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A transaction left open in the store's own database keeps every row appended since
    past the coarse rule's horizon; with walks of two rows, nearly every read stops at a
    walk's end, among the gaps that refused appends leave, and hands over to the precise
    rule. What the store returns must still be the model's log, whole and in order."""
    monkeypatch.setattr(high_water, "_COARSE", high_water.statements(2)[0])
    monkeypatch.setattr(high_water, "_PRECISE", high_water.statements(2)[1])
    with _xid_held(PG_URL):
        _runs_like_its_model()


def _runs_like_its_model() -> None:
    """The store's hypothesis state machine (`test_model`), each example in a schema of its
    own, dropped afterwards."""
    schemas: list[str] = []

    def new_url() -> str:
        schemas.append(f"model_{uuid.uuid4().hex[:12]}")
        return f"{PG_URL}?schema={schemas[-1]}"

    try:
        run_state_machine_as_test(
            machine_on(new_url),
            settings=settings(
                max_examples=10,
                stateful_step_count=12,
                deadline=None,
                suppress_health_check=list(HealthCheck),
            ),
        )
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            for schema in schemas:
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def test_a_store_made_by_the_previous_release_gets_the_append_that_takes_the_lock(
    pg_url: str,
) -> None:
    """0.1's append function drew positions without the append lock: a reader of 0.2 would
    take its in-flight appends for strangers and pass their gaps."""
    target = PostgresTarget.from_url(pg_url)
    lock = f"PERFORM pg_advisory_xact_lock_shared({schema.LOG_LOCK_KEY});"
    previous = append_functions.APPEND.replace(lock, "")
    assert previous != append_functions.APPEND
    with EventStore.open(pg_url) as store:
        store.append("early-1", [NewEvent("Early", {})])
    with psycopg.connect(target.conninfo, options=target.options(), autocommit=True) as conn:
        conn.execute(previous.encode())

    with (
        EventStore.open(pg_url) as store,
        psycopg.connect(target.conninfo, options=target.options()) as held,
    ):
        position = append_uncommitted(held, "held-1")[0]
        later = store.append("later-1", [NewEvent("Later", {})]).positions[0]
        assert [e.position for e in store.read_all()] == [1]
        status = store.log_status().held
        assert status is not None and (status.position, status.pid) == (
            position,
            held.info.backend_pid,
        )
        held.commit()
        assert [e.position for e in store.read_all()] == [1, position, later]
