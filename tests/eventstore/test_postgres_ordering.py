"""PostgreSQL hands out positions in one order and commits in another: readers
must never pass a position that a running transaction may still fill."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import psycopg
import pytest
from eventcraft.eventstore import EventStore, NewEvent
from eventcraft.eventstore.postgres.connections import PostgresTarget

from ..processes import PROCESSES
from . import workers
from .held_appends import append_uncommitted
from .tailing import tail_until_written


@pytest.fixture
def store(pg_url: str) -> Iterator[EventStore]:
    with EventStore.open(pg_url) as opened:
        yield opened


@pytest.fixture
def raw(pg_url: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection to the store's schema, in a transaction the test commits or not."""
    target = PostgresTarget.from_url(pg_url)
    with psycopg.connect(target.conninfo, options=target.options()) as conn:
        yield conn


def test_a_reader_waits_at_a_position_whose_transaction_is_still_open(
    store: EventStore, raw: psycopg.Connection[Any]
) -> None:
    first = store.append("early-1", [NewEvent("Early", {})]).positions[0]
    held = append_uncommitted(raw, "held-1")[0]
    later = store.append("later-1", [NewEvent("Later", {})]).positions[0]
    assert first < held < later

    assert [e.position for e in store.read_all()] == [first]
    assert store.high_water_mark() == first
    assert list(store.read_all(after=first)) == []
    assert list(store.read_all(after=first, types=["Later"])) == []

    raw.commit()
    assert [e.position for e in store.read_all(after=first)] == [held, later]
    assert store.high_water_mark() == later


def test_a_reader_passes_a_hole_left_by_a_rolled_back_append(
    store: EventStore, raw: psycopg.Connection[Any]
) -> None:
    held = append_uncommitted(raw, "held-1")[0]
    later = store.append("later-1", [NewEvent("Later", {})]).positions[0]
    assert list(store.read_all()) == []
    raw.rollback()
    assert [e.position for e in store.read_all()] == [later]
    assert held < later
    assert store.high_water_mark() == later


def test_a_failed_append_leaves_no_gap_a_reader_waits_for(store: EventStore) -> None:
    store.append("order-1", [NewEvent("A", {})])
    duplicate = NewEvent("B", {})
    store.append("order-2", [duplicate])
    with pytest.raises(ValueError):
        store.append("order-3", [NewEvent("C", {}), duplicate])  # takes positions, then fails
    last = store.append("order-4", [NewEvent("D", {})]).positions[0]
    assert [e.type for e in store.read_all()] == ["A", "B", "D"]
    assert store.high_water_mark() == last


def test_a_tailing_reader_never_skips_slow_or_rolled_back_commits(pg_url: str) -> None:
    writers, appends = 4, 60
    with (
        EventStore.open(pg_url) as store,
        ProcessPoolExecutor(writers, mp_context=PROCESSES) as pool,
    ):
        futures = [
            pool.submit(workers.slow_committer, pg_url, w, appends, seed=w) for w in range(writers)
        ]
        tail_until_written(store, futures)
