"""The store when its PostgreSQL server dies: a server of the test's own, killed for real;
through both APIs (the async one behind `BlockingEventStore`)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any, cast

import psycopg
import pytest
from eventcraft.eventstore import (
    NO_STREAM,
    AppendOutcomeUnknown,
    BlockingEventStore,
    EventStore,
    NewEvent,
    StoreUnavailable,
)
from eventcraft.eventstore.postgres import PostgresTarget
from eventcraft.eventstore.sql import schema

from ..postgres_server import PostgresServer, postgres_server


@pytest.fixture
def server() -> Iterator[PostgresServer]:
    with postgres_server() as started:
        yield started


@pytest.fixture(params=["sync", "async"])
def open_store(request: pytest.FixtureRequest) -> Callable[[str], EventStore]:
    if request.param == "sync":
        return EventStore.open
    return lambda url: cast(EventStore, BlockingEventStore.open(url))


def _blocking_appends(url: str) -> psycopg.Connection[Any]:
    """A session holding the store's append lock exclusively: appends wait on it, sent."""
    target = PostgresTarget.from_url(url)
    conn = psycopg.connect(target.conninfo, options=target.options())
    conn.execute(f"SELECT pg_advisory_xact_lock({schema.LOG_LOCK_KEY})")
    return conn


def _waiting_for_the_lock(url: str) -> bool:
    with psycopg.connect(PostgresTarget.from_url(url).conninfo) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        ).fetchone()
    return bool(row and row[0])


@pytest.mark.slow
def test_an_append_cut_off_after_it_was_sent_says_its_outcome_is_unknown(
    server: PostgresServer, open_store: Callable[[str], EventStore]
) -> None:
    url = f"{server.url}?schema=store"
    event = NewEvent("OrderPlaced", {"n": 1})
    with open_store(url) as store:
        blocker = _blocking_appends(url)
        outcome: list[BaseException] = []

        def append() -> None:
            try:
                store.append("order-1", [event], expected_version=NO_STREAM)
            except BaseException as error:
                outcome.append(error)

        appending = threading.Thread(target=append)
        appending.start()
        deadline = threading.Event()
        while not _waiting_for_the_lock(url):
            assert not deadline.wait(0.01) and appending.is_alive()
        server.kill()  # the append was sent and is waiting: its answer never comes
        appending.join(30)
        blocker.close()

        (error,) = outcome
        assert isinstance(error, AppendOutcomeUnknown) and isinstance(error, StoreUnavailable)
        assert error.stream_id == "order-1"
        assert "may or may not have been written" in str(error)
        assert "retrying the same events is safe" in str(error)
        assert isinstance(error.__cause__, psycopg.OperationalError)

        server.start()
        result = store.append("order-1", [event], expected_version=NO_STREAM)  # the retry
        assert result.version == 1
        assert store.append("order-1", [event], expected_version=NO_STREAM) == result
        assert [e.id for e in store.read_stream("order-1")] == [event.id]


@pytest.mark.slow
def test_an_append_to_a_server_that_is_down_is_unavailable_and_wrote_nothing(
    server: PostgresServer, open_store: Callable[[str], EventStore]
) -> None:
    url = f"{server.url}?schema=store"
    with open_store(url) as store:
        server.stop("immediate")
        with pytest.raises(StoreUnavailable) as refused:
            store.append("order-1", [NewEvent("OrderPlaced", {})])
        assert not isinstance(refused.value, AppendOutcomeUnknown)
        server.start()
        assert list(store.read_stream("order-1")) == []
