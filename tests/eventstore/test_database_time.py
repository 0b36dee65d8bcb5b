"""The store tells its database's time, which leases recorded in events are timed by:
PostgreSQL's clock, read by the server, or the host's, for a database in the process."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import psycopg
from eventcraft.eventstore import AsyncEventStore, EventStore

from ..conftest import PG_URL


def _database_or_host_now(url: str) -> datetime:
    if url.startswith("postgresql"):
        with psycopg.connect(PG_URL) as connection:
            row = connection.execute("SELECT clock_timestamp()").fetchone()
            assert row is not None
            return row[0]  # type: ignore[no-any-return]
    return datetime.now(UTC)


def test_the_stores_time_is_its_databases(store_url: str) -> None:
    with EventStore.open(store_url) as store:
        before = _database_or_host_now(store_url)
        now = store.now()
        after = _database_or_host_now(store_url)
    assert now.tzinfo is not None
    assert before <= now <= after


def test_the_async_stores_time_is_its_databases(store_url: str) -> None:
    async def read() -> tuple[datetime, datetime, datetime]:
        async with await AsyncEventStore.open(store_url) as store:
            before = _database_or_host_now(store_url)
            now = await store.now()
            return before, now, _database_or_host_now(store_url)

    before, now, after = asyncio.run(read())
    assert before <= now <= after
