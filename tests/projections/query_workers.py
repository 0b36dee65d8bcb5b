"""Writers of tagged events, run in processes of their own by the query subscription tests."""

from __future__ import annotations

from typing import Any

from eventcraft.eventstore import EventStore, NewEvent


def tag_of(worker: int, n: int) -> str:
    """Every third event of every writer is watched; the others are not."""
    return "watch:yes" if n % 3 == 0 else f"watch:no-{worker}"


def write_tagged(url: str, worker: int, count: int, barrier: Any) -> list[int]:
    """Append `count` events one by one, each tagged by `tag_of`; return their positions."""
    positions: list[int] = []
    with EventStore.open(url) as store:
        barrier.wait()
        for n in range(count):
            event = NewEvent("Noted", {"worker": worker, "n": n}, tags=[tag_of(worker, n)])
            positions.extend(store.append(f"writer-{worker}", [event]).positions)
    return positions
