"""Processes beside a retention run: one that appends while it removes, one that is a run
held in the middle of writing its archive."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from multiprocessing.synchronize import Event
from typing import TypeVar

from eventcraft.eventstore import EventStore, NewEvent

T = TypeVar("T")


def keep_appending(url: str, stream: str, started: Event, stop: Event) -> None:
    """One-event appends to `stream`, each at the version the last one left, until `stop`."""
    with EventStore.open(url) as store:
        version = 0
        while True:
            store.append(stream, [NewEvent("Ticked", {"n": version})], expected_version=version)
            version += 1
            started.set()
            if stop.is_set():
                return


def apply_held_while_archiving(url: str, archive: str, writing: Event, go_on: Event) -> None:
    """A retention run that, once it has begun writing its segment, waits for `go_on`:
    a run caught mid-archive, where a second run would find the archive unchanged."""
    from eventcraft.eventstore.retention import RetentionPolicy

    from eventcraft.operations import retention

    paced = retention._paced

    def held(records: Iterable[T], pace: float) -> Iterator[T]:
        for n, record in enumerate(paced(records, pace)):
            if n == 1:
                writing.set()
                go_on.wait(60)
            yield record

    retention._paced = held
    with EventStore.open(url) as store:
        retention.apply(store, [RetentionPolicy("order", max_count=1)], [], archive)
