"""Code that runs in separate processes during the concurrency tests.

Module-level functions so that a spawned process can import them.
"""

from __future__ import annotations

import random
import uuid
from typing import Any, cast

from eventcraft.eventstore import (
    ANY,
    BlockingEventStore,
    EventStore,
    NewEvent,
    WrongExpectedVersion,
)


def opened(url: str, api: str = "sync") -> EventStore:
    """The store at `url` through the sync API, or the async one behind a blocking face."""
    if api == "async":
        return cast(EventStore, BlockingEventStore.open(url))
    return EventStore.open(url)


def race(
    url: str, stream_id: str, rounds: int, barrier: Any, size: int = 1, api: str = "sync"
) -> list[bool]:
    """In each round, append `size` events to `stream_id` expecting the version the round
    starts at; True if it won."""
    won = []
    with opened(url, api) as store:
        for round_ in range(rounds):
            barrier.wait()
            batch = [NewEvent("Raced", {"i": i}) for i in range(size)]
            try:
                store.append(stream_id, batch, expected_version=round_ * size)
                won.append(True)
            except WrongExpectedVersion:
                won.append(False)
    return won


def write_mix(url: str, writer: int, appends: int, seed: int, api: str = "sync") -> list[str]:
    """Append to shared streams (ANY) and to private streams (exact versions).

    Returns the ids of the events written, as strings.
    """
    rng = random.Random(seed)
    written: list[str] = []
    private_versions: dict[str, int] = {}
    with opened(url, api) as store:
        for n in range(appends):
            # Now and then a batch large enough for PostgreSQL to write in parts.
            size = 700 if rng.random() < 0.04 else rng.choice((1, 1, 1, 2, 5))
            batch = [NewEvent("Mixed", {"writer": writer, "n": n, "i": i}) for i in range(size)]
            if rng.random() < 0.5:
                store.append(f"shared-{rng.randrange(3)}", batch, expected_version=ANY)
            else:
                stream = f"private{writer}-{rng.randrange(4)}"
                version = private_versions.get(stream, 0)
                private_versions[stream] = store.append(stream, batch, version).version
            written += [str(event.id) for event in batch]
    return written


def append_then_report(
    url: str, stream_id: str, event_ids: list[str], api: str = "sync"
) -> tuple[int, ...]:
    """Append a batch with the given ids; the positions it got."""
    batch = [NewEvent("Retried", {"n": n}, id=uuid.UUID(i)) for n, i in enumerate(event_ids)]
    with opened(url, api) as store:
        return store.append(stream_id, batch).positions


def slow_committer(url: str, writer: int, appends: int, seed: int) -> list[str]:
    """Append through the PostgreSQL function inside transactions that linger before
    committing, and roll one in five back: commits land far out of position order
    and leave holes. Returns the ids of the committed events."""
    import time

    import psycopg
    from eventcraft.eventstore.postgres.connections import PostgresTarget

    from .held_appends import append_uncommitted

    rng = random.Random(seed)
    target = PostgresTarget.from_url(url)
    committed: list[str] = []
    with psycopg.connect(target.conninfo, options=target.options()) as conn:
        for n in range(appends):
            ids = [uuid.uuid4() for _ in range(rng.choice((1, 3)))]
            append_uncommitted(
                conn, f"slow-{writer}", [NewEvent("Slow", {"n": n}, id=i) for i in ids]
            )
            time.sleep(rng.random() * 0.01)  # the window in which later positions commit first
            if rng.random() < 0.2:
                conn.rollback()
            else:
                conn.commit()
                committed += [str(i) for i in ids]
    return committed
