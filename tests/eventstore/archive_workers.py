"""Processes beside a reader of a store opened with `archive=`: retention runs, one at a
time or one after another, moving the low-water mark while the reader is mid-way."""

from __future__ import annotations

import time
from multiprocessing.synchronize import Event

from eventcraft.eventstore import EventStore
from eventcraft.eventstore.retention import RetentionPolicy

ORDERS = [RetentionPolicy("order", max_count=1)]


def run_once(url: str, archive: str, up_to: int | None = None) -> None:
    """One retention run: every order's events but its newest, up to `up_to`."""
    from eventcraft.operations import retention

    with EventStore.open(url) as store:
        retention.apply(store, ORDERS, [], archive, up_to=up_to)


def run_in_steps(url: str, archive: str, marks: list[int], started: Event) -> None:
    """A run up to each of `marks` in turn, as fast as they go, once `started` is set."""
    from eventcraft.operations import retention
    from eventcraft.operations.errors import Problems

    started.wait(60)
    with EventStore.open(url) as store:
        for mark in marks:
            deadline = time.monotonic() + 30
            while True:
                try:
                    retention.apply(store, ORDERS, [], archive, up_to=mark)
                    break
                except Problems as busy:
                    # PostgreSQL: this process's last run's lock session ends on the server
                    # a moment after its client closed it (no other process runs retention
                    # here); until it has, a run is refused.
                    if "another retention run holds" not in str(busy):
                        raise
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.01)
