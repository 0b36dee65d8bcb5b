"""Code that runs in processes of their own during the tests of retention on a partitioned
store (`test_partition_retention.py`): a reader reading the whole log over and over while
a run goes on, a writer appending meanwhile, and a run stopped between detaching a
partition and attaching its replacement, there to be killed. Module-level functions, so
that a forked process can import them."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import psycopg
from eventcraft.eventstore import EventStore, NewEvent
from eventcraft.eventstore.postgres import partition_retention
from eventcraft.eventstore.retention import RetentionPolicy, Truncation

from eventcraft.operations import retention

RULES = (
    [
        RetentionPolicy("order", max_age=timedelta(days=30)),
        RetentionPolicy("cart", max_count=2),
    ],
    [Truncation("sensor-1", 8)],
)
"""The rules of the tests' runs: by age, by count, a truncation (and deleted streams)."""


def read_passes(url: str, started: Any, stop: Any) -> list[list[int]]:
    """Read the whole log's positions again and again until `stop` is set, and once more
    after: each pass's positions. `started` is set after the first pass."""
    passes: list[list[int]] = []
    with EventStore.open(url) as store:
        while True:
            stopping = stop.is_set()
            passes.append([event.position for event in store.read_all()])
            started.set()
            if stopping:
                return passes


def append_while(url: str, started: Any, stop: Any) -> int:
    """Append one event at a time to a stream of its own until `stop` is set (after one
    append at least); the number appended."""
    done = 0
    with EventStore.open(url) as store:
        while True:
            stopping = stop.is_set()
            store.append("meanwhile-1", [NewEvent("Ticked", {"n": done})], expected_version=done)
            done += 1
            started.set()
            if stopping:
                return done


def stop_after_detaching(url: str, archive: str, reached: Any) -> None:
    """A run that stops for ever once it has detached a partition, before it attaches the
    replacement: the test kills this process there. The failpoint wraps psycopg's execute
    in this process only."""
    execute = psycopg.Connection.execute

    def stopping(self: psycopg.Connection[Any], query: Any, *args: Any, **kwargs: Any) -> Any:
        result = execute(self, query, *args, **kwargs)
        if isinstance(query, str) and "DETACH PARTITION" in query:
            reached.set()
            threading.Event().wait()
        return result

    psycopg.Connection.execute = stopping  # type: ignore[method-assign]
    partition_retention.SWAP_LOCK_TIMEOUT = "60s"  # the swap, not its fallback, on a busy machine
    with EventStore.open(url) as store:
        retention.apply(store, *RULES, archive)
