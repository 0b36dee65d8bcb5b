"""A store opened with a read replica: reads go to the standby, writes and conditions to
the primary, and a caller reads its own writes."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest
from eventcraft.eventstore import (
    AppendCondition,
    AppendConditionFailed,
    AsyncEventStore,
    EventStore,
    NewEvent,
    PostgresTarget,
    Query,
    QueryItem,
    UnsupportedStoreURL,
    redacted,
)
from eventcraft.eventstore.postgres import async_standby, replicas, standby
from eventcraft.eventstore.postgres import backend as postgres_backend

from ...replica_server import caught_up, pause_replay, resume_replay
from ..held_appends import append_uncommitted
from .conftest import Pair

# slow: A primary and a hot standby of their own, started for the module.
pytestmark = pytest.mark.slow


def _with_replica(pair: Pair) -> str:
    return replicas.with_replicas(pair.primary_url, [pair.standby_url])


@contextmanager
def _paused(pair: Pair) -> Iterator[None]:
    pause_replay(pair.standby)
    try:
        yield
    finally:
        resume_replay(pair.standby)


@pytest.fixture(autouse=True)
def _short_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """A read after the store's own write waits for a paused standby a moment, not 2 s."""
    monkeypatch.setattr(standby, "READ_YOUR_WRITES_WAIT", 0.3)
    monkeypatch.setattr(async_standby, "READ_YOUR_WRITES_WAIT", 0.3)


def _types(store: EventStore, after: int = 0) -> list[str]:
    return [event.type for event in store.read_all(after=after)]


@pytest.mark.slow
def test_reads_come_from_the_standby_and_appends_go_to_the_primary(pair: Pair) -> None:
    with EventStore.open(pair.primary_url) as writer, EventStore.open(_with_replica(pair)) as store:
        writer.append("order-1", [NewEvent("Placed", {})])
        caught_up(pair.primary, pair.standby)
        assert _types(store) == ["Placed"]
        with _paused(pair):
            writer.append("order-1", [NewEvent("Paid", {})], expected_version=1)
            # The standby has not replayed it: a store reading there does not see it...
            assert _types(store) == ["Placed"]
            assert [e.type for e in store.read_stream("order-1")] == ["Placed"]
            assert store.high_water_mark() == 1
            assert store.count_events() == 1
            # ...and its appends still reach the primary, checked there.
            result = store.append("order-1", [NewEvent("Shipped", {})], expected_version=2)
            assert result.version == 3
        caught_up(pair.primary, pair.standby)
        assert _types(store) == ["Placed", "Paid", "Shipped"]


@pytest.mark.slow
def test_a_caller_reads_its_own_append_at_once(pair: Pair) -> None:
    with EventStore.open(_with_replica(pair)) as store:
        for n in range(1, 21):
            store.append("cart-1", [NewEvent("Added", {"n": n})], expected_version=n - 1)
            assert store.stream_version("cart-1") == n
            assert [e.data["n"] for e in store.read_stream("cart-1")][-1] == n


def test_a_caller_reads_its_own_append_from_the_primary_while_replay_is_paused(
    pair: Pair,
) -> None:
    with EventStore.open(_with_replica(pair)) as store, _paused(pair):
        store.append("cart-1", [NewEvent("Added", {})])
        assert [e.type for e in store.read_stream("cart-1")] == ["Added"]
        assert _types(store) == ["Added"]


def test_a_condition_is_checked_on_the_primary_against_what_the_standby_has_not_shown(
    pair: Pair,
) -> None:
    seats = Query([QueryItem(types=["Booked"], tags=["course:c1"])])
    with EventStore.open(pair.primary_url) as other, EventStore.open(_with_replica(pair)) as store:
        booked = NewEvent("Booked", {}, tags=["course:c1"])
        other.append("booking-1", [booked])
        caught_up(pair.primary, pair.standby)
        read = store.read_query(seats)
        assert [e.type for e in read.events] == ["Booked"]
        with _paused(pair):
            other.append("booking-2", [NewEvent("Booked", {}, tags=["course:c1"])])
            assert len(store.read_query(seats).events) == 1  # the standby's view
            with pytest.raises(AppendConditionFailed):
                store.append(
                    "booking-3",
                    [NewEvent("Booked", {}, tags=["course:c1"])],
                    condition=AppendCondition(seats, after=read.head),
                )


def test_the_replica_lag_is_in_the_log_status(pair: Pair) -> None:
    with EventStore.open(pair.primary_url) as writer, EventStore.open(_with_replica(pair)) as store:
        writer.append("order-1", [NewEvent("Placed", {})])
        caught_up(pair.primary, pair.standby)
        status = store.log_status()
        assert status.replica is not None
        assert (status.replica.events, status.replica.paused) == (0, False)
        with _paused(pair):
            writer.append("order-2", [NewEvent("Placed", {}), NewEvent("Paid", {})])
            lag = store.log_status().replica
            assert lag is not None
            assert (lag.high_water_mark, lag.events, lag.paused) == (1, 2, True)
            assert lag.bytes > 0
        caught_up(pair.primary, pair.standby)
        lag = store.log_status().replica
        assert lag is not None and (lag.high_water_mark, lag.events) == (3, 0)
    with EventStore.open(pair.primary_url) as primary_only:
        assert primary_only.log_status().replica is None


def test_the_async_store_reads_from_the_standby_too(pair: Pair) -> None:
    async def run() -> tuple[list[str], list[str]]:
        async with (
            await AsyncEventStore.open(pair.primary_url) as writer,
            await AsyncEventStore.open(_with_replica(pair)) as store,
        ):
            await writer.append("order-1", [NewEvent("Placed", {})])
            caught_up(pair.primary, pair.standby)
            assert [e.type async for e in store.read_all()] == ["Placed"]  # its open, replayed
            with _paused(pair):
                await writer.append("order-1", [NewEvent("Paid", {})])
                seen = [e.type async for e in store.read_all()]
                await store.append("order-2", [NewEvent("Mine", {})])
                own = [e.type async for e in store.read_stream("order-2")]
            return seen, own

    assert asyncio.run(run()) == (["Placed"], ["Mine"])


@pytest.mark.parametrize(
    ("replica", "says"),
    [
        ("sqlite:///x.db", "URL of a PostgreSQL standby"),
        ("postgresql://h/db?schema=other", "replica's schema"),
    ],
)
def test_a_replica_url_that_cannot_be_one_is_refused(replica: str, says: str) -> None:
    url = replicas.with_replicas("postgresql://h/db?schema=shop", [replica])
    with pytest.raises(UnsupportedStoreURL, match=says):
        replicas.split_url(url)


def test_a_url_with_two_replicas_is_refused_for_now() -> None:
    url = replicas.with_replicas("postgresql://h/db", ["postgresql://a/db", "postgresql://b/db"])
    with pytest.raises(UnsupportedStoreURL, match="one replica"):
        replicas.split_url(url)


def test_a_url_that_names_a_replica_targets_its_primary_elsewhere() -> None:
    """The key table, retention and the shell read such a URL as the primary's."""
    url = replicas.with_replicas("postgresql://app@db/shop?schema=s", ["postgresql://app@ro/shop"])
    target = PostgresTarget.from_url(url)
    assert target == PostgresTarget.from_url("postgresql://app@db/shop?schema=s")


def test_a_store_opened_with_replicas_reads_from_the_standby(pair: Pair) -> None:
    with (
        EventStore.open(pair.primary_url) as writer,
        EventStore.open(pair.primary_url, replicas=[pair.standby_url]) as store,
    ):
        writer.append("order-1", [NewEvent("Placed", {})])
        caught_up(pair.primary, pair.standby)
        assert _types(store) == ["Placed"]  # its open (a write) is on the standby by now
        with _paused(pair):
            writer.append("order-1", [NewEvent("Paid", {})])
            assert _types(store) == ["Placed"]
        assert store.log_status().replica is not None


def test_replicas_are_refused_for_a_store_that_is_not_postgresql() -> None:
    with pytest.raises(UnsupportedStoreURL, match="replicas= is for PostgreSQL"):
        EventStore.open("sqlite:///shop.db", replicas=["postgresql://ro/shop"])


def test_a_waiter_on_the_replica_wakes_for_an_append_on_the_primary(pair: Pair) -> None:
    with EventStore.open(pair.primary_url) as writer, EventStore.open(_with_replica(pair)) as store:
        assert not store.wait_for_events(after=0, timeout=0.2)
        position = writer.append("order-1", [NewEvent("Placed", {})]).positions[0]
        assert store.wait_for_events(after=0, timeout=30)
        assert [e.position for e in store.read_all()] == [position]


def test_reads_go_to_the_primary_while_the_standby_is_down(pair: Pair) -> None:
    with EventStore.open(_with_replica(pair)) as store:
        store.append("order-1", [NewEvent("Placed", {})])
        assert _types(store) == ["Placed"]
        pair.standby.stop("fast")
        try:
            store.append("order-1", [NewEvent("Paid", {})])
            assert _types(store) == ["Placed", "Paid"]
            assert [e.type for e in store.read_stream("order-1")] == ["Placed", "Paid"]
        finally:
            pair.standby.start()
        caught_up(pair.primary, pair.standby)


def test_the_replicas_password_is_masked_in_messages() -> None:
    url = replicas.with_replicas("postgresql://app:pw1@db/shop", ["postgresql://ro:s3cret@sb/shop"])
    shown = redacted(url)
    assert "s3cret" not in shown and "pw1" not in shown
    assert shown.startswith("postgresql://app:***@db/shop?replica=")


def test_a_reads_pages_come_from_the_server_its_mark_was_judged_on(
    pair: Pair, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mark judged on the primary (the standby lagging behind the store's own write)
    and a later page read from a standby that shows 3 but not yet 2 would skip 2."""
    monkeypatch.setattr(postgres_backend, "PAGE", 1)
    with (
        EventStore.open(pair.primary_url) as writer,
        EventStore.open(_with_replica(pair)) as store,
        psycopg.connect(pair.primary_url) as held,
    ):
        first = writer.append("order-1", [NewEvent("Placed", {})]).positions[0]
        second = append_uncommitted(held, "held-1")[0]
        third = writer.append("order-3", [NewEvent("Placed", {})]).positions[0]
        caught_up(pair.primary, pair.standby)
        with _paused(pair):
            held.commit()  # the primary shows 2; the standby not yet
            reads = store._backend._reads  # type: ignore[attr-defined]
            primary_then_standby = iter([reads._primary, reads.pool])
            monkeypatch.setattr(reads, "reader", lambda: next(primary_then_standby, reads.pool))
            assert [e.position for e in store.read_all()] == [first, second, third]


def test_a_store_made_by_its_open_reads_its_tables_on_the_standby_at_once(pair: Pair) -> None:
    with _paused(pair), EventStore.open(_with_replica(pair)) as store:
        assert list(store.read_all()) == []  # from the primary: the standby has no tables


def test_a_waiter_wakes_while_the_standby_is_down(pair: Pair) -> None:
    with EventStore.open(pair.primary_url) as writer, EventStore.open(_with_replica(pair)) as store:
        assert _types(store) == []
        pair.standby.stop("fast")
        try:
            position = writer.append("order-1", [NewEvent("Placed", {})]).positions[0]
            assert store.wait_for_events(after=0, timeout=30)
            assert [e.position for e in store.read_all()] == [position]
        finally:
            pair.standby.start()
        caught_up(pair.primary, pair.standby)
