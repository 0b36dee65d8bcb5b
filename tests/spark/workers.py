"""Writer processes for the Spark tests (spawned: module-level functions only)."""

from __future__ import annotations

from typing import Any

from eventcraft.eventstore import ANY, EventStore

from .histories import new_event


def keep_appending(url: str, writer: int, started: Any, stop: Any) -> None:
    """Append deposits (and some openings, closings, v1 deposits) until told to stop."""
    kinds = ["open", "deposit", "deposit_v1", "withdraw", "deposit", "close"]
    with EventStore.open(url) as store:
        n = 0
        while not stop.is_set() or n < 20:
            number = writer * 100 + n % 7
            kind = kinds[n % len(kinds)]
            store.append(f"account-{number}", [new_event(kind, number, n + 1)], ANY)
            n += 1
            if n == 5:
                started.set()
