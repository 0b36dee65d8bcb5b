"""The store's input beyond the conformance suite: opening, per-store limits, PostgreSQL's JSON."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from pathlib import Path

import psycopg
import pytest
from eventcraft.eventstore import (
    AsyncEventStore,
    EventStore,
    InvalidEvent,
    NewEvent,
    StoreUnavailable,
    UnsupportedStoreURL,
)
from eventcraft.eventstore.arguments import without_password

# --- opening -------------------------------------------------------------------


def test_a_sqlite_file_the_os_cannot_create_is_store_unavailable() -> None:
    url = "sqlite:////proc/forbidden/x.db"
    with pytest.raises(
        StoreUnavailable, match=r"'sqlite:////proc/forbidden/x\.db'.*forbidden"
    ) as caught:
        EventStore.open(url, create_folders=True)
    assert isinstance(caught.value.__cause__, OSError)


def test_a_sqlite_path_that_is_a_folder_is_store_unavailable(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}"
    with pytest.raises(StoreUnavailable, match="unable to open database file") as caught:
        EventStore.open(url)
    assert url in str(caught.value)
    assert isinstance(caught.value.__cause__, sqlite3.Error)


def test_an_unreachable_server_is_store_unavailable_without_the_password() -> None:
    url = f"postgresql://ann:s3cr3t-{uuid.uuid4().hex}@127.0.0.1:1/none?connect_timeout=2"
    with pytest.raises(StoreUnavailable) as caught:
        EventStore.open(url)
    message = str(caught.value)
    assert "postgresql://ann:***@127.0.0.1:1/none" in message
    assert "s3cr3t" not in message
    assert isinstance(caught.value.__cause__, psycopg.OperationalError)


@pytest.mark.parametrize("password", ["s3cr@t", "a@b@c", "p:ss%2Fw%3Frd%231", "100%"])
def test_a_password_with_url_characters_reaches_the_server_whole(
    pg_url: str, password: str
) -> None:
    # The test server trusts every connection: a store that opens was sent the right host.
    url = pg_url.replace("postgresql://postgres@", f"postgresql://postgres:{password}@", 1)
    with EventStore.open(url) as store:
        store.append("account-1", [NewEvent("Opened", {})])

    async def append_async() -> int:
        async with await AsyncEventStore.open(url) as store:
            return (await store.append("account-1", [NewEvent("Deposited", {})], 1)).version

    assert asyncio.run(append_async()) == 2


def test_an_unreachable_server_shows_no_part_of_a_password_holding_an_at_sign() -> None:
    url = "postgresql://ann:s3cr@t-secret@127.0.0.1:1/none?connect_timeout=2"
    with pytest.raises(StoreUnavailable) as caught:
        EventStore.open(url)
    message = str(caught.value)
    assert "postgresql://ann:***@127.0.0.1:1/none" in message
    assert "s3cr" not in message and "secret" not in message


def test_a_driver_message_quoting_a_password_shows_neither_of_its_forms() -> None:
    url = "postgresql://ann:s3cr%40t@db.example/none"
    shown = without_password(url, "password for s3cr@t (s3cr%40t) refused")
    assert shown == "password for *** (***) refused"


def test_a_url_with_a_nul_character_is_unsupported() -> None:
    with pytest.raises(UnsupportedStoreURL, match="NUL"):
        EventStore.open("sqlite:///events\x00.db")


# --- the size limit of a store -----------------------------------------------------


def test_a_store_opens_with_a_limit_of_4_mib_per_event() -> None:
    with EventStore.open("memory://") as store:
        assert store.max_event_bytes == 4 * 1024 * 1024


def test_a_store_keeps_the_limit_it_was_opened_with(store_url: str) -> None:
    limit = 100
    frame = len(b'{"blob":""}') + len(b'{"k":"m"}')
    with EventStore.open(store_url, max_event_bytes=limit) as store:
        at_limit = NewEvent("Big", {"blob": "x" * (limit - frame)}, metadata={"k": "m"})
        over = NewEvent("Big", {"blob": "x" * (limit - frame)}, metadata={"k": "mm"})
        with pytest.raises(InvalidEvent, match=r"takes 101 bytes .*10 of metadata.*limit is 100"):
            store.append("blob-1", [at_limit, over])
        assert list(store.read_all()) == []
        assert store.append("blob-1", [at_limit]).version == 1


@pytest.mark.parametrize("limit", [0, -1, True, 1.5, "4MiB", None], ids=repr)
def test_an_unusable_size_limit_is_refused(limit: object) -> None:
    with pytest.raises(InvalidEvent, match="max_event_bytes"):
        EventStore.open("memory://", max_event_bytes=limit)  # type: ignore[arg-type]


# --- what PostgreSQL's jsonb does to JSON -------------------------------------------


def test_postgres_keeps_neither_key_order_nor_how_a_whole_float_was_written(pg_url: str) -> None:
    with EventStore.open(pg_url) as store:
        store.append("order-1", [NewEvent("A", {"bb": 1, "a": 2, "big": 1e16, "half": 2.5})])
        (recorded,) = store.read_stream("order-1")
    assert list(recorded.data) == ["a", "bb", "big", "half"]
    assert recorded.data["big"] == 10**16 and type(recorded.data["big"]) is int
    assert type(recorded.data["half"]) is float


@pytest.mark.parametrize("url", ["memory://", "sqlite"], ids=["memory", "sqlite"])
def test_memory_and_sqlite_keep_the_json_as_written(url: str, sqlite_url: str) -> None:
    with EventStore.open(sqlite_url if url == "sqlite" else url) as store:
        store.append("order-1", [NewEvent("A", {"bb": 1, "a": 2, "big": 1e16})])
        (recorded,) = store.read_stream("order-1")
    assert list(recorded.data) == ["bb", "a", "big"]
    assert type(recorded.data["big"]) is float
