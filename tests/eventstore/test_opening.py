"""Opening a store from its URL: a SQLite file is made only in a folder that is there
unless the caller asks for folders, and every backend refuses an option it does not take."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from eventcraft.eventstore import (
    AsyncEventStore,
    EventStore,
    NewEvent,
    PostgresTarget,
    StoreUnavailable,
    UnsupportedStoreURL,
    postgres_holds_store,
)

OpenStore = Callable[[str, bool], None]


def _open_sync(url: str, create_folders: bool) -> None:
    with EventStore.open(url, create_folders=create_folders) as store:
        store.append("order-1", [NewEvent("Placed", {})])


def _open_async(url: str, create_folders: bool) -> None:
    async def opened() -> None:
        async with await AsyncEventStore.open(url, create_folders=create_folders) as store:
            await store.append("order-1", [NewEvent("Placed", {})])

    asyncio.run(opened())


@pytest.fixture(params=["sync", "async"])
def open_store(request: pytest.FixtureRequest) -> OpenStore:
    """Opens a store by URL and appends one event, through `EventStore` or `AsyncEventStore`."""
    return _open_sync if request.param == "sync" else _open_async


def test_a_sqlite_url_in_a_missing_folder_is_refused_naming_the_folder(
    tmp_path: Path, open_store: OpenStore
) -> None:
    missing = tmp_path / "typo" / "dir"
    url = f"sqlite:///{missing / 'events.db'}"
    with pytest.raises(StoreUnavailable, match="create_folders") as caught:
        open_store(url, False)
    assert f"there is no folder {str(missing)!r}" in str(caught.value)
    assert not (tmp_path / "typo").exists()


def test_a_sqlite_store_makes_its_folders_when_asked(tmp_path: Path, open_store: OpenStore) -> None:
    path = tmp_path / "new" / "folder" / "events.db"
    open_store(f"sqlite:///{path}", True)
    with EventStore.open(f"sqlite:///{path}") as store:
        assert [e.type for e in store.read_all()] == ["Placed"]


def test_a_sqlite_store_is_made_in_a_folder_that_is_there(
    tmp_path: Path, open_store: OpenStore
) -> None:
    open_store(f"sqlite:///{tmp_path / 'events.db'}", False)
    assert (tmp_path / "events.db").is_file()


@pytest.mark.parametrize(
    ("url", "takes"),
    [
        ("sqlite:///{tmp}/events.db?synchronus=off", "it takes synchronous"),
        ("sqlite:///{tmp}/events.db?shard=x", "it takes synchronous"),
        ("sqlite:///{tmp}/events.db?synchronous=normal&shard=x", "it takes synchronous"),
        ("memory://?shard=x", "it takes none"),
    ],
)
def test_an_option_a_backend_does_not_take_is_refused_naming_those_it_takes(
    tmp_path: Path, open_store: OpenStore, url: str, takes: str
) -> None:
    with pytest.raises(UnsupportedStoreURL, match="unknown option") as caught:
        open_store(url.format(tmp=tmp_path), True)
    assert takes in str(caught.value)
    assert list(tmp_path.iterdir()) == []  # refused before any file is made


def test_an_option_postgresql_does_not_take_is_refused(pg_url: str, open_store: OpenStore) -> None:
    with pytest.raises(UnsupportedStoreURL, match="shard"):
        open_store(f"{pg_url}&shard=x", False)


def test_a_postgresql_schema_named_with_capitals_is_the_one_opened_again(
    pg_url: str, open_store: OpenStore
) -> None:
    # The store makes the schema under its name as given, quoted; unquoted, PostgreSQL
    # folded it to lower case when it was looked for, and the store would not open.
    schema = f"Shop_{pg_url.rsplit('=', 1)[1]}"
    url = pg_url.rsplit("?", 1)[0] + f"?schema={schema}"
    try:
        open_store(url, False)
        open_store(url, False)
        with EventStore.open(url) as store:
            assert store.high_water_mark() == 2
        assert postgres_holds_store(url, PostgresTarget.from_url(url))
    finally:
        with psycopg.connect(url.rsplit("?", 1)[0], autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'.encode())
