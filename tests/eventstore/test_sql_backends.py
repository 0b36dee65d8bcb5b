"""What only the SQL backends can show: the database itself guards the log."""

from __future__ import annotations

import sqlite3
import threading
import uuid

import psycopg
import pytest
from eventcraft.eventstore import NO_STREAM, EventStore, NewEvent, StoreUnavailable
from eventcraft.eventstore.postgres import PostgresBackend
from eventcraft.eventstore.postgres.connections import PostgresTarget

from ..conftest import PG_URL


def _raw_sql(url: str, statement: str) -> None:
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            conn.execute(statement)
        return
    target = PostgresTarget.from_url(url)
    with psycopg.connect(target.conninfo, options=target.options()) as conn:
        conn.execute(statement.encode())


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE eventcraft_events SET type = 'Forged'",
        "DELETE FROM eventcraft_events",
    ],
    ids=["update", "delete"],
)
def test_the_database_refuses_to_change_stored_events(
    shared_store_url: str, statement: str
) -> None:
    with EventStore.open(shared_store_url) as store:
        store.append("order-1", [NewEvent("Placed", {})])
        with pytest.raises((sqlite3.IntegrityError, psycopg.Error), match="append-only"):
            _raw_sql(shared_store_url, statement)
        assert [e.type for e in store.read_all()] == ["Placed"]


def test_postgres_refuses_to_truncate_the_log(pg_url: str) -> None:
    with EventStore.open(pg_url) as store:
        store.append("order-1", [NewEvent("Placed", {})])
        with pytest.raises(psycopg.Error, match="append-only"):
            _raw_sql(pg_url, "TRUNCATE eventcraft_events")
        assert len(list(store.read_all())) == 1


def _drop_store_connections(name: str) -> int:
    """Terminate every connection of the store opened as application `name`, as a server
    restart would; only its own, for other stores may be at work on the shared server."""
    with psycopg.connect(PG_URL, autocommit=True, application_name="test") as conn:
        row = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = %s",
            (name,),
        ).fetchone()
    return int(row[0]) if row else 0


def test_appends_go_on_after_the_server_drops_the_connection(pg_url: str) -> None:
    name = f"eventcraft_{uuid.uuid4().hex[:8]}"
    with EventStore.open(f"{pg_url}&application_name={name}") as store:
        batch = [NewEvent("Placed", {}), NewEvent("Paid", {})]
        first = store.append("order-1", batch)
        assert _drop_store_connections(name) >= 1
        # The client did not hear back, say, and resends: the store reconnects,
        # recognises the batch and answers as the first time.
        assert store.append("order-1", batch) == first
        assert _drop_store_connections(name) >= 1
        assert store.append("order-1", [NewEvent("Shipped", {})], expected_version=2).version == 3
        assert _drop_store_connections(name) >= 1
        assert [e.type for e in store.read_all()] == ["Placed", "Paid", "Shipped"]


@pytest.mark.parametrize("size", [1, 1001], ids=["one", "large"])
def test_appends_go_on_after_the_session_forgets_its_prepared_statements(
    pg_url: str, size: int
) -> None:
    with EventStore.open(pg_url) as store:
        store.append("order-1", [NewEvent("Placed", {})])
        backend = store._backend
        assert isinstance(backend, PostgresBackend)
        # What a pooler's DISCARD ALL does to the session the appends use.
        backend._pool.run(lambda conn: conn.execute("DEALLOCATE ALL"))
        batch = [NewEvent("Numbered", {"n": n}) for n in range(size)]
        assert store.append("order-1", batch, expected_version=1).version == size + 1
        prepared = backend._pool.run(
            lambda conn: conn.execute("SELECT name FROM pg_prepared_statements").fetchall()
        )
        assert len(prepared) == 1  # prepared again, on that same session


def test_an_unreachable_server_is_a_clear_error() -> None:
    with pytest.raises(StoreUnavailable, match="cannot connect to PostgreSQL"):
        EventStore.open(
            f"postgresql://nobody@127.0.0.1:1/none?connect_timeout=2&application_name={uuid.uuid4().hex}"
        )


def test_a_store_made_before_snapshots_existed_gains_their_table(shared_store_url: str) -> None:
    with EventStore.open(shared_store_url) as store:
        store.append("account-1", [NewEvent("Opened", {})])
    _raw_sql(shared_store_url, "DROP TABLE eventcraft_snapshots")
    with EventStore.open(shared_store_url) as store:
        store.save_snapshot("account-1", version=1, type="Account", data={"ok": True})
        snapshot = store.load_snapshot("account-1")
        assert snapshot is not None and snapshot.data == {"ok": True}
        assert [e.type for e in store.read_stream("account-1")] == ["Opened"]


def test_a_store_of_the_earlier_layout_is_brought_up_to_date(shared_store_url: str) -> None:
    """Earlier releases kept each stream's version in the streams table and, on
    PostgreSQL, sent the NOTIFY from a trigger inside the append."""
    with EventStore.open(shared_store_url) as store:
        store.append("account-1", [NewEvent("Opened", {})])
    _raw_sql(shared_store_url, "ALTER TABLE eventcraft_streams ADD COLUMN version BIGINT")
    _raw_sql(shared_store_url, "UPDATE eventcraft_streams SET version = 1")
    postgres = shared_store_url.startswith("postgresql")
    if postgres:
        _raw_sql(shared_store_url, "ALTER TABLE eventcraft_streams ALTER version SET NOT NULL")
        _raw_sql(
            shared_store_url,
            "CREATE FUNCTION eventcraft_notify() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN PERFORM pg_notify('eventcraft_events', TG_TABLE_SCHEMA); RETURN NULL; END $$",
        )
        _raw_sql(
            shared_store_url,
            "CREATE TRIGGER eventcraft_events_notify AFTER INSERT ON eventcraft_events "
            "FOR EACH STATEMENT EXECUTE FUNCTION eventcraft_notify()",
        )
    with EventStore.open(shared_store_url) as reader, EventStore.open(shared_store_url) as writer:
        writer.append("account-1", [NewEvent("Deposited", {})], expected_version=1)
        writer.append("account-2", [NewEvent("Opened", {})], expected_version=NO_STREAM)
        assert [(s.stream_id, s.version) for s in reader.list_streams()] == [
            ("account-1", 2),
            ("account-2", 1),
        ]
        waiting = threading.Event()
        answers: list[bool] = []

        def wait() -> None:
            waiting.set()
            answers.append(reader.wait_for_events(after=3, timeout=30))

        thread = threading.Thread(target=wait)
        thread.start()
        waiting.wait()
        writer.append("account-1", [NewEvent("Deposited", {})], expected_version=2)
        thread.join(timeout=30)
        assert answers == [True]
    if postgres:
        with pytest.raises(psycopg.Error, match="does not exist"):
            _raw_sql(shared_store_url, "SELECT 'eventcraft_notify()'::regprocedure")
