"""Forgetting a person leaves nothing to recover: personal fields never reach the database's
files in the clear, and a forgotten subject's key is gone from them (SQLite's file and WAL;
the data directory of a PostgreSQL server of the test's own, and its `pg_dump`), while the
other subject reads as before. Through both APIs; a forget in another process wins once
the reader's cached key expires."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import psycopg
import pytest
from eventcraft.eventstore import (
    FORGOTTEN,
    AsyncEventStore,
    EventStore,
    KeyStore,
    NewEvent,
    Personal,
)
from pydantic import BaseModel

from tests.postgres_server import postgres_server

# slow: A server of its own, read as a thief would.
pytestmark = pytest.mark.slow

PLAIN = {"c1": ("Ada Lovelace", "ada@analytical.example"), "c2": ("Charles Babbage", "cb@x.ex")}


class Registered(BaseModel):
    customer_id: str
    name: Annotated[str, Personal(subject="customer_id")]
    email: Annotated[str, Personal(subject="customer_id")]


def _append_both(url: str, api: str) -> None:
    events = {
        f"customer-{who}": [
            NewEvent("Registered", Registered(customer_id=who, name=name, email=email))
        ]
        for who, (name, email) in PLAIN.items()
    }
    if api == "sync":
        with EventStore.open(url) as store:
            for stream_id, batch in events.items():
                store.append(stream_id, batch)
        return

    async def appended() -> None:
        async with await AsyncEventStore.open(url) as store:
            for stream_id, batch in events.items():
                await store.append(stream_id, batch)

    asyncio.run(appended())


def _forget(url: str, api: str, subject: str) -> int:
    if api == "sync":
        with EventStore.open(url) as store:
            return store.forget(subject)

    async def forgotten() -> int:
        async with await AsyncEventStore.open(url) as store:
            return await store.forget(subject)

    return asyncio.run(forgotten())


def _names(url: str) -> dict[str, str]:
    with EventStore.open(url) as store:
        return {e.data["customer_id"]: e.data["name"] for e in store.read_all()}


def _found_in(files: Iterator[Path], needle: bytes) -> list[str]:
    return [str(path) for path in files if path.is_file() and needle in path.read_bytes()]


def _plaintexts(who: str) -> list[bytes]:
    return [text.encode() for text in PLAIN[who]]


@pytest.mark.parametrize("api", ["sync", "async"])
def test_sqlite_files_keep_no_plaintext_and_no_forgotten_key(tmp_path: Path, api: str) -> None:
    path = tmp_path / "events.db"
    url = f"sqlite:///{path}"
    _append_both(url, api)

    def files() -> Iterator[Path]:
        return tmp_path.glob("events.db*")  # the database, its WAL and shared memory

    def key_of(who: str) -> bytes:
        with sqlite3.connect(path) as conn:
            (material,) = conn.execute(
                "SELECT material FROM eventcraft_keys WHERE subject = ?", (who,)
            ).fetchone()
        return bytes(material)

    forgotten_key, kept_key = key_of("c1"), key_of("c2")
    assert _found_in(files(), forgotten_key), "the key is in the files before the forget"
    assert _forget(url, api, "c1") == 1
    for needle in [*_plaintexts("c1"), *_plaintexts("c2"), forgotten_key]:
        assert not _found_in(files(), needle), needle
    assert _found_in(files(), kept_key)
    assert _names(url) == {"c1": FORGOTTEN, "c2": "Charles Babbage"}


@pytest.fixture(scope="module")
def own_server() -> Iterator[str]:
    with postgres_server() as server:
        yield server.url


def _checkpoint(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CHECKPOINT")  # dirty pages into the data files, where a thief looks


@pytest.mark.postgres
@pytest.mark.parametrize("api", ["sync", "async"])
def test_postgres_data_directory_and_dump_keep_no_plaintext_and_no_forgotten_key(
    own_server: str, api: str
) -> None:
    schema = f"forget_{api}"
    url = f"{own_server}?schema={schema}"
    _append_both(url, api)
    with psycopg.connect(own_server) as conn:
        rows = conn.execute(f"SELECT subject, material FROM {schema}.eventcraft_keys").fetchall()
        data_dir = Path(conn.execute("SHOW data_directory").fetchone()[0])  # type: ignore[index]
    keys = {subject: bytes(material) for subject, material in rows}
    _checkpoint(own_server)

    def files(*, wal: bool = True) -> Iterator[Path]:
        return (p for p in data_dir.rglob("*") if wal or "pg_wal" not in p.parts)

    assert _found_in(files(wal=False), keys["c1"]), "the key is in the files before the forget"
    assert _forget(url, api, "c1") == 1
    _checkpoint(own_server)
    for needle in [*_plaintexts("c1"), *_plaintexts("c2")]:
        assert not _found_in(files(), needle), needle
    # The write-ahead log keeps the key until its segment is recycled (see sqlite/key_table.py).
    assert not _found_in(files(wal=False), keys["c1"])
    assert _found_in(files(wal=False), keys["c2"])
    dump = _pg_dump(own_server)
    for needle in [*_plaintexts("c1"), *_plaintexts("c2"), keys["c1"].hex().encode()]:
        assert needle not in dump, needle
    assert keys["c2"].hex().encode() in dump
    assert _names(url) == {"c1": FORGOTTEN, "c2": "Charles Babbage"}


def _pg_dump(url: str) -> bytes:
    done = subprocess.run(["pg_dump", "--dbname", url], capture_output=True, check=False)
    if done.returncode != 0:
        raise AssertionError(done.stderr.decode())
    return done.stdout


_FORGET_ELSEWHERE = """
import sys
from eventcraft.eventstore import EventStore
with EventStore.open(sys.argv[1]) as store:
    print(store.forget(sys.argv[2]))
"""


def test_a_forget_in_another_process_wins_once_the_cached_key_expires(
    shared_store_url: str,
) -> None:
    now = [0.0]
    keys = KeyStore(KeyStore.open(shared_store_url).table, cache_seconds=5, clock=lambda: now[0])
    with EventStore.open(shared_store_url, keys=keys) as store:
        _append_both(shared_store_url, "sync")
        assert _names_in(store)["c1"] == "Ada Lovelace"  # the key is cached now
        done = subprocess.run(
            [sys.executable, "-c", _FORGET_ELSEWHERE, shared_store_url, "c1"],
            capture_output=True,
            text=True,
            check=True,
        )
        assert done.stdout.strip() == "1"
        assert _names_in(store)["c1"] == "Ada Lovelace"  # within cache_seconds
        now[0] += 5
        assert _names_in(store) == {"c1": FORGOTTEN, "c2": "Charles Babbage"}


def test_without_a_cache_a_forget_elsewhere_wins_at_once(shared_store_url: str) -> None:
    keys = KeyStore.open(shared_store_url, cache_seconds=0)
    with EventStore.open(shared_store_url, keys=keys) as store:
        _append_both(shared_store_url, "sync")
        assert _names_in(store)["c1"] == "Ada Lovelace"
        subprocess.run(
            [sys.executable, "-c", _FORGET_ELSEWHERE, shared_store_url, "c1"], check=True
        )
        assert _names_in(store)["c1"] == FORGOTTEN


def _names_in(store: EventStore) -> dict[str, Any]:
    return {e.data["customer_id"]: e.data["name"] for e in store.read_all()}


def test_keys_may_live_in_a_database_of_their_own(tmp_path: Path, pg_url: str) -> None:
    keys_url = f"sqlite:///{tmp_path / 'keys.db'}"
    with EventStore.open(pg_url, keys=keys_url) as store:
        store.append(
            "customer-c1",
            [
                NewEvent(
                    "Registered", Registered(customer_id="c1", name="Ada Lovelace", email="a@x.ex")
                )
            ],
        )
    with psycopg.connect(pg_url.split("?")[0]) as conn:
        schema = pg_url.split("schema=")[1]
        # No key in the store's database: its key table, made by the open, stays empty.
        row = conn.execute(f"SELECT count(*) FROM {schema}.eventcraft_keys").fetchone()
        assert row == (0,)
    with sqlite3.connect(tmp_path / "keys.db") as conn:
        assert conn.execute("SELECT subject FROM eventcraft_keys").fetchall() == [("c1",)]
    with EventStore.open(pg_url, keys=keys_url) as store:
        assert _names_in(store) == {"c1": "Ada Lovelace"}
        store.forget("c1")
        assert _names_in(store) == {"c1": FORGOTTEN}


def test_the_key_store_reconnects_when_the_server_ended_its_connection(pg_url: str) -> None:
    with EventStore.open(pg_url, keys=KeyStore.open(pg_url, cache_seconds=0)) as store:
        _append_both(pg_url, "sync")
        assert _names_in(store)["c1"] == "Ada Lovelace"
        table: Any = store.keys.table
        idle = [conn.info.backend_pid for conn in table._pool._idle]  # its pooled connections
        assert idle
        with psycopg.connect(pg_url.split("?")[0], autocommit=True) as admin:
            for pid in idle:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        assert _names_in(store)["c1"] == "Ada Lovelace"  # read again, on a new connection
        assert store.forget("c1") == 1
        assert _names_in(store)["c1"] == FORGOTTEN
