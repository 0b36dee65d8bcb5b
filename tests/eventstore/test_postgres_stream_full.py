"""On PostgreSQL a stream holds at most MAX_STREAM_VERSION events (4-byte versions):
an append past it is refused alone, with `StreamFull`, and writes nothing."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import orjson
import psycopg
import pytest
from eventcraft.eventstore import (
    ANY,
    MAX_STREAM_VERSION,
    NO_STREAM,
    AsyncEventStore,
    EventStore,
    NewEvent,
    StreamFull,
)
from eventcraft.eventstore.sql.schema import APPEND_GROUP, EVENTS, POSITION_SEQUENCE

from ..conftest import PG_URL


def _in_store(pg_url: str) -> psycopg.Connection[Any]:
    """A connection to the server, on the store's schema."""
    conn = psycopg.connect(PG_URL, autocommit=True)
    conn.execute(f"SET search_path TO {pg_url.split('schema=', 1)[1]}")
    return conn


def _fill(pg_url: str, stream_id: str) -> None:
    """Give `stream_id` its last possible event, written straight into the table:
    appending two billion events is not a test."""
    with _in_store(pg_url) as conn:
        conn.execute(
            f"INSERT INTO {EVENTS} (position, version, recorded_at, id, stream_id, type, "
            f"category, data, metadata) VALUES (nextval('{POSITION_SEQUENCE}'), %s, now(), "
            "%s, %s, 'Counted', %s, '{}', '{}')",
            (MAX_STREAM_VERSION, uuid.uuid4(), stream_id, stream_id.split("-")[0]),
        )


_APPENDS: list[tuple[str, list[NewEvent], object]] = [
    ("other-1", [NewEvent("Opened", {})], NO_STREAM),
    ("ledger-1", [NewEvent("Counted", {}), NewEvent("Counted", {})], ANY),
]


def _refusals(store: EventStore) -> list[StreamFull]:
    refused = []
    for expected in (ANY, MAX_STREAM_VERSION):
        with pytest.raises(StreamFull) as caught:
            store.append("ledger-1", [NewEvent("Counted", {})], expected)
        refused.append(caught.value)
    with pytest.raises(StreamFull) as caught:
        store.append_many(_APPENDS)  # type: ignore[arg-type]
    return [*refused, caught.value]


async def _async_refusals(url: str) -> list[StreamFull]:
    refused = []
    async with await AsyncEventStore.open(url) as store:
        for expected in (ANY, MAX_STREAM_VERSION):
            with pytest.raises(StreamFull) as caught:
                await store.append("ledger-1", [NewEvent("Counted", {})], expected)
            refused.append(caught.value)
        with pytest.raises(StreamFull) as caught:
            await store.append_many(_APPENDS)  # type: ignore[arg-type]
    return [*refused, caught.value]


@pytest.mark.parametrize("api", ["sync", "async"])
def test_an_append_past_the_most_versions_raises_stream_full_and_writes_nothing(
    pg_url: str, api: str
) -> None:
    with EventStore.open(pg_url) as store:
        store.append("ledger-1", [NewEvent("Opened", {})])
        _fill(pg_url, "ledger-1")
        head = store.high_water_mark()
        refused = _refusals(store) if api == "sync" else asyncio.run(_async_refusals(pg_url))
        assert store.high_water_mark() == head
        assert store.stream_version("other-1") == 0
        assert store.stream_version("ledger-1") == MAX_STREAM_VERSION
    assert [(error.stream_id, error.most) for error in refused] == [
        ("ledger-1", MAX_STREAM_VERSION)
    ] * 3
    assert "is full" in str(refused[0]) and "nothing was written" in str(refused[0])


def test_a_full_stream_fails_its_own_member_of_a_group_and_no_other(pg_url: str) -> None:
    """Appends of several callers share a commit: a full stream must not fail the rest,
    as the 4-byte column's overflow error would."""
    with EventStore.open(pg_url) as store:
        store.append("ledger-1", [NewEvent("Opened", {})])
        _fill(pg_url, "ledger-1")

    def member(stream_id: str, expected: int) -> list[object]:
        event = {"id": str(uuid.uuid4()), "type": "Counted", "data": {}, "metadata": {}}
        return [[stream_id, stream_id.split("-")[0], expected, [event]]]

    members = [member("ledger-1", -1), member("other-1", 0)]
    with _in_store(pg_url) as conn:
        row = conn.execute(
            f"SELECT {APPEND_GROUP}(%s, NULL)", (orjson.dumps(members).decode(),)
        ).fetchone()
    assert row is not None
    full, other = row[0].split("\n")
    assert full.startswith("!EC004 0 ")
    assert not other.startswith("!")
    with EventStore.open(pg_url) as store:
        assert store.stream_version("other-1") == 1
        assert store.stream_version("ledger-1") == MAX_STREAM_VERSION
