"""Code that runs in separate processes during the partitioned store's tests
(`test_partitions.py`). Module-level functions so that a forked process can import them.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

from eventcraft.eventstore import ANY, AppendResult, NewEvent

from .workers import opened


def cross_bounds(url: str, writer: int, appends: int, barrier: Any, api: str = "sync") -> list[str]:
    """After `barrier`, append batches of 1 to 25 events (partitions hold 10 positions)
    to a private stream at exact versions and to shared streams at ANY; the ids written."""
    rng = random.Random(writer)
    written: list[str] = []
    version = 0
    with opened(url, api) as store:
        barrier.wait()
        for n in range(appends):
            size = rng.choice((1, 3, 9, 11, 25))
            batch = [NewEvent("Crossed", {"w": writer, "n": n, "i": i}) for i in range(size)]
            if n % 2:
                store.append(f"shared-{n % 3}", batch, expected_version=ANY)
            else:
                store.append(f"own-{writer}", batch, expected_version=version)
                version += size
            written += [str(event.id) for event in batch]
    return written


def same_ids(
    url: str, stream_id: str, ids: list[str], barrier: Any, api: str = "sync"
) -> AppendResult:
    """After `barrier`, append one batch with `ids` to `stream_id` as a new stream: every
    process sends the same append, as a client's retries racing each other would."""
    batch = [NewEvent("Sent", {"n": n}, id=uuid.UUID(i)) for n, i in enumerate(ids)]
    with opened(url, api) as store:
        barrier.wait()
        return store.append(stream_id, batch)
