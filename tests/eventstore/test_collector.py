"""Reads build their pages with the cycle collector paused, and leave it as they found it."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator

import pytest
from eventcraft.eventstore import AsyncEventStore, EventStore, NewEvent, Query, QueryItem

EVENTS = 3000  # three pages


def _fill(url: str) -> None:
    with EventStore.open(url) as store:
        for n in range(EVENTS // 100):
            store.append(f"acct-{n}", [NewEvent("Deposited", {"n": k}) for k in range(100)])


@pytest.fixture
def young_collections() -> Iterator[list[int]]:
    """How many collections of the youngest generation ran while the test read."""
    counted: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 0:
            counted.append(1)

    gc.callbacks.append(count)
    yield counted
    gc.callbacks.remove(count)


def test_a_read_leaves_the_collector_on_and_builds_each_page_in_one_go(
    shared_store_url: str, young_collections: list[int]
) -> None:
    _fill(shared_store_url)
    with EventStore.open(shared_store_url) as store:
        gc.collect()
        young_collections.clear()
        read = list(store.read_all())
        assert gc.isenabled()
    assert len(read) == EVENTS
    # Built with the collector running, each page of 1,000 events set off four or more.
    assert len(young_collections) <= 2 * (EVENTS // 1000)


def test_a_read_leaves_a_collector_switched_off_off(shared_store_url: str) -> None:
    _fill(shared_store_url)
    with EventStore.open(shared_store_url) as store:
        gc.disable()
        try:
            assert len(list(store.read_all())) == EVENTS
            assert not gc.isenabled()
        finally:
            gc.enable()


def test_an_async_read_leaves_the_collector_on_and_builds_each_page_in_one_go(
    shared_store_url: str, young_collections: list[int]
) -> None:
    _fill(shared_store_url)

    async def read() -> int:
        async with await AsyncEventStore.open(shared_store_url) as store:
            gc.collect()
            young_collections.clear()
            return len([event async for event in store.read_all()])

    assert asyncio.run(read()) == EVENTS
    assert gc.isenabled()
    assert len(young_collections) <= 2 * (EVENTS // 1000)


@pytest.mark.parametrize("api", ["sync", "async"])
def test_a_read_by_query_builds_its_page_in_one_go(
    shared_store_url: str, young_collections: list[int], api: str
) -> None:
    """A decision's read: on PostgreSQL its first page comes locked, from a statement of
    its own, and is built with the collector paused as every other page is."""
    with EventStore.open(shared_store_url) as store:
        for n in range(10):
            events = [NewEvent("Enrolled", {"n": k}, tags=["course:c1"]) for k in range(100)]
            store.append(f"enrolment-{n}", events)
    query = Query([QueryItem(types=["Enrolled"], tags=["course:c1"])])

    async def read_async() -> int:
        async with await AsyncEventStore.open(shared_store_url) as store:
            gc.collect()
            young_collections.clear()
            return len((await store.read_query(query)).events)

    if api == "async":
        assert asyncio.run(read_async()) == 1000
    else:
        with EventStore.open(shared_store_url) as store:
            gc.collect()
            young_collections.clear()
            assert len(store.read_query(query).events) == 1000
    assert gc.isenabled()
    assert len(young_collections) <= 2
