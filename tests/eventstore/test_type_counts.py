"""`count_types` through the port's defaults, as a backend of a third party that does not
count for itself has them: sync (`Backend`) and async (`AsyncBackend`), against the
memory backend's own count of the same log."""

from __future__ import annotations

import asyncio

from eventcraft.eventstore import EVENT_VERSION, AsyncEventStore, EventStore, NewEvent, TypeCount
from eventcraft.eventstore.async_port import AsyncBackend
from eventcraft.eventstore.async_threaded import ThreadedBackend
from eventcraft.eventstore.memory import MemoryBackend
from eventcraft.eventstore.port import Backend


class _Uncounting(MemoryBackend):
    """The memory backend without its own count: the sync port's default counts."""

    count_types = Backend.count_types


class _AsyncUncounting(ThreadedBackend):
    """An async backend without its own count: the async port's default counts."""

    count_types = AsyncBackend.count_types


def _fill(store: EventStore) -> None:
    store.append("order-1", [NewEvent("Placed", {}), NewEvent("Placed", {}, {EVENT_VERSION: 2})])
    store.append("order-2", [NewEvent("Paid", {}, {"user": "ann", EVENT_VERSION: "2"})])
    store.append("order-3", [NewEvent("Placed", {}, {EVENT_VERSION: 1})])


def _counted(store: EventStore, *arguments: object, **options: object) -> list[tuple[object, ...]]:
    return [
        (c.type, c.event_version, c.events, c.last_position)
        for c in store.count_types(*arguments, **options)  # type: ignore[arg-type]
    ]


def test_the_sync_ports_default_counts_as_a_backend_does() -> None:
    with (
        EventStore(MemoryBackend(), "memory://") as own,
        EventStore(_Uncounting(), "memory://") as plain,
    ):
        _fill(own)
        _fill(plain)
        expected = [("Paid", 0, 1, 3), ("Placed", 1, 2, 4), ("Placed", 2, 1, 2)]
        assert _counted(plain) == _counted(own) == expected
        assert _counted(plain, 1, 3, types=["Placed"]) == _counted(own, 1, 3, types=["Placed"])
        assert _counted(plain, 1, 3, types=["Placed"]) == [("Placed", 2, 1, 2)]


def test_the_async_ports_default_counts_as_a_backend_does() -> None:
    async def counted() -> list[TypeCount]:
        backend = _AsyncUncounting(MemoryBackend(), in_place=True)
        async with AsyncEventStore(backend, "memory://") as store:
            await store.append("order-1", [NewEvent("Placed", {}, {EVENT_VERSION: 2})])
            await store.append("order-2", [NewEvent("Placed", {}), NewEvent("Paid", {})])
            return await store.count_types()

    found = asyncio.run(counted())
    assert [(c.type, c.event_version, c.events, c.last_position) for c in found] == [
        ("Paid", 1, 1, 3),
        ("Placed", 1, 1, 2),
        ("Placed", 2, 1, 1),
    ]
