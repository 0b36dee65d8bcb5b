"""A process that appends while a retention run removes: the run's concurrency test's."""

from __future__ import annotations

from multiprocessing.synchronize import Event

from eventcraft.eventstore import EventStore, NewEvent


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
