"""A PostgreSQL forget whose erasure from the key table's file cannot finish at once (a
transaction older than it is open, its VACUUM FULL is cancelled) says so, reads the subject
as forgotten at once, and is completed by the next forget; a key table made before forgets
marked what they owe is upgraded and owes a rewrite for the keys it had forgotten."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Annotated

import psycopg
import pytest
from eventcraft.eventstore import (
    FORGOTTEN,
    EventStore,
    KeyStore,
    NewEvent,
    Personal,
    StoreUnavailable,
)
from eventcraft.eventstore.postgres.key_table import PostgresKeyTable
from pydantic import BaseModel

from ..postgres_server import postgres_server
from ..waiting import until

pytestmark = pytest.mark.postgres


class Registered(BaseModel):
    customer_id: str
    name: Annotated[str, Personal(subject="customer_id")]


@pytest.fixture(scope="module")
def quiet_server() -> Iterator[str]:
    """A PostgreSQL server of the module's own: a forget's erasure waits for every
    transaction older than it, and on the shared server another test's (another pytest-xdist
    worker's, a benchmark's) may be open and keep it pending where these tests expect it
    done."""
    with postgres_server() as server:
        yield server.url


@pytest.fixture
def pg_url(quiet_server: str) -> str:
    """A new store's URL on the quiet server."""
    return f"{quiet_server}?schema=t_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def admin(pg_url: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(pg_url.split("?")[0], autocommit=True) as conn:
        yield conn


def _schema(pg_url: str) -> str:
    return pg_url.split("schema=")[1]


def _registered(store: EventStore, *who: str) -> None:
    for one in who:
        store.append(
            f"customer-{one}",
            [NewEvent("Registered", Registered(customer_id=one, name=f"Ada {one}"))],
        )


def _material(admin: psycopg.Connection, schema: str, who: str) -> bytes:
    row = admin.execute(
        f"SELECT material FROM {schema}.eventcraft_keys WHERE subject = %s", (who,)
    ).fetchone()
    assert row is not None and row[0] is not None
    return bytes(row[0])


def _in_table_file(admin: psycopg.Connection, schema: str, needle: bytes) -> bool:
    """Whether `needle` is in the key table's file on disk (dirty pages written first)."""
    admin.execute("CHECKPOINT")
    (path,) = admin.execute(
        "SELECT pg_relation_filepath(%s)", (f"{schema}.eventcraft_keys",)
    ).fetchone()  # type: ignore[misc]
    (data,) = admin.execute("SELECT pg_read_binary_file(%s)", (path,)).fetchone()  # type: ignore[misc]
    return needle in bytes(data)


def _store(pg_url: str, wait: float) -> EventStore:
    return EventStore.open(pg_url, keys=KeyStore(PostgresKeyTable(pg_url, snapshot_wait=wait)))


def test_a_forget_with_an_older_snapshot_open_is_pending_until_the_next_forget(
    pg_url: str, admin: psycopg.Connection, caplog: pytest.LogCaptureFixture
) -> None:
    schema = _schema(pg_url)
    with _store(pg_url, wait=0.2) as store:
        _registered(store, "a1", "a2")
        key = _material(admin, schema, "a1")
        with psycopg.connect(pg_url.split("?")[0]) as other:
            other.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            other.execute("SELECT 1").fetchone()  # a snapshot older than the forget
            assert store.forget("a1") == 1
            assert store.keys.erasure_pending()
            assert "still open" in caplog.text and key.hex() not in caplog.text
            other.rollback()
        assert next(store.read_stream("customer-a1")).data["name"] == FORGOTTEN
        assert _in_table_file(admin, schema, key), "kept: VACUUM FULL would have copied it"
        assert store.forget("a2") == 1  # any later forget completes the pending one
        assert not store.keys.erasure_pending()
        assert not _in_table_file(admin, schema, key)


def test_a_forget_waits_for_an_older_snapshot_to_end_then_erases_the_key(
    pg_url: str, admin: psycopg.Connection
) -> None:
    schema = _schema(pg_url)
    with _store(pg_url, wait=60) as store:
        _registered(store, "a1")
        key = _material(admin, schema, "a1")
        other = psycopg.connect(pg_url.split("?")[0])
        other.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        other.execute("SELECT 1").fetchone()
        done: list[int] = []
        forgetting = threading.Thread(target=lambda: done.append(store.forget("a1")))
        forgetting.start()
        try:
            erased = f"SELECT forgotten_at IS NOT NULL FROM {schema}.eventcraft_keys"
            until(lambda: admin.execute(erased).fetchone() == (True,), "the erasure's commit")
            assert forgetting.is_alive()  # waiting for `other`, not rewriting yet
        finally:
            other.rollback()
            other.close()
        forgetting.join()
        assert done == [1]
        assert not store.keys.erasure_pending()
        assert not _in_table_file(admin, schema, key)


def test_a_forget_whose_rewrite_is_cancelled_is_completed_by_the_next(
    pg_url: str, admin: psycopg.Connection
) -> None:
    schema = _schema(pg_url)
    with _store(pg_url, wait=60) as store:
        _registered(store, "a1")
        assert next(store.read_stream("customer-a1")).data["name"] == "Ada a1"  # key cached
        key = _material(admin, schema, "a1")
        with psycopg.connect(pg_url.split("?")[0]) as blocker:
            (blocker_pid,) = blocker.execute("SELECT pg_backend_pid()").fetchone()  # type: ignore[misc]
            blocker.execute(f"SELECT 1 FROM {schema}.eventcraft_keys LIMIT 1").fetchall()
            failed: list[BaseException] = []

            def forget() -> None:
                try:
                    store.forget("a1")
                except StoreUnavailable as error:
                    failed.append(error)

            forgetting = threading.Thread(target=forget)
            forgetting.start()
            waiting = "SELECT pid FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))"
            while forgetting.is_alive():  # its VACUUM FULL, and the repeat on a new connection
                for (pid,) in admin.execute(waiting, (blocker_pid,)).fetchall():
                    admin.execute("SELECT pg_cancel_backend(%s)", (pid,))
                forgetting.join(0.05)
            assert failed, "the forget's rewrite was cancelled"
            blocker.rollback()
        # The erasure committed: this process reads the subject as forgotten at once.
        assert next(store.read_stream("customer-a1")).data["name"] == FORGOTTEN
        assert store.keys.erasure_pending()
        assert store.forget("a1") == 0  # nothing left to erase, but the rewrite is owed
        assert not store.keys.erasure_pending()
        assert not _in_table_file(admin, schema, key)


def test_a_key_table_made_before_owes_a_rewrite_for_its_forgotten_keys(
    pg_url: str, admin: psycopg.Connection
) -> None:
    schema = _schema(pg_url)
    with _store(pg_url, wait=60) as store:
        _registered(store, "a1", "a2")
    key = _material(admin, schema, "a1")
    # As an earlier release left it: no mark, and a forget cut short before its VACUUM FULL.
    admin.execute(f"ALTER TABLE {schema}.eventcraft_keys DROP COLUMN erased_xid")
    admin.execute(
        f"UPDATE {schema}.eventcraft_keys SET material = NULL, forgotten_at = now() "
        "WHERE subject = 'a1'"
    )
    with _store(pg_url, wait=60) as store:
        assert store.keys.erasure_pending()
        assert store.forget("nobody") == 0
        assert not store.keys.erasure_pending()
        assert next(store.read_stream("customer-a2")).data["name"] == "Ada a2"
    assert not _in_table_file(admin, schema, key)
