"""Readers that run in another process while a test holds transactions open on the server.

Module-level functions so that a spawned process can import them.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from eventcraft.eventstore import AsyncEventStore, EventStore
from eventcraft.projections import ProjectionRunner, Subscription


def read_now(url: str) -> dict[str, Any]:
    """What each kind of reader sees at once: the log, its high-water mark and a catch-up."""
    started = time.monotonic()
    seen: list[int] = []
    with EventStore.open(url) as store:
        positions = [event.position for event in store.read_all()]
        high_water_mark = store.high_water_mark()
        with ProjectionRunner(
            store, [Subscription("gap-reader", lambda event: seen.append(event.position))]
        ) as runner:
            runner.catch_up()
    return {
        "read_all": positions,
        "high_water_mark": high_water_mark,
        "catch_up": seen,
        "seconds": time.monotonic() - started,
    }


def wait_for_event(
    url: str, after: int, ready: Any, timeout: float, api: str = "sync"
) -> dict[str, Any]:
    """Wait for an event past `after` as a live subscriber does; when it came (monotonic).
    `api`: "sync" (`EventStore`) or "async" (`AsyncEventStore`)."""
    if api == "async":
        return asyncio.run(_wait_for_event_async(url, after, ready, timeout))
    with EventStore.open(url) as store:
        store.high_water_mark()  # connected and listening before the test appends
        ready.set()
        woke = store.wait_for_events(after, timeout)
        at = time.monotonic()
        positions = [event.position for event in store.read_all(after=after)]
    return {"woke": woke, "at": at, "positions": positions}


async def _wait_for_event_async(url: str, after: int, ready: Any, timeout: float) -> dict[str, Any]:
    async with await AsyncEventStore.open(url) as store:
        await store.high_water_mark()  # connected and listening before the test appends
        ready.set()
        woke = await store.wait_for_events(after, timeout)
        at = time.monotonic()
        positions = [event.position async for event in store.read_all(after=after)]
    return {"woke": woke, "at": at, "positions": positions}
