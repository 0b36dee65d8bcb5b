"""What the processes of the tenant tests run: module-level, so that a spawned process can
import it."""

from __future__ import annotations

import threading
import time
from typing import Any

from eventcraft.eventstore import NO_STREAM, EventStore, NewEvent, Tenants, WrongExpectedVersion


def claim(
    template: str, own: str, shared: str, writer: int, rounds: int, barrier: Any
) -> tuple[list[bool], list[bool]]:
    """Each round, at the same moment as the other process: claim the next version of
    `order-1` in tenant `own` (this process's alone), then in tenant `shared` (both
    processes'). Whether each claim won, round by round."""
    own_won, shared_won = [], []
    with Tenants(template, most_open=1) as tenants:
        mine, ours = tenants.for_tenant(own), tenants.for_tenant(shared)
        for round_ in range(rounds):
            barrier.wait()
            own_won.append(_claimed(mine, writer, round_))
            shared_won.append(_claimed(ours, writer, round_))
    return own_won, shared_won


def _claimed(store: EventStore, writer: int, version: int) -> bool:
    try:
        store.append("order-1", [NewEvent("Claimed", {"writer": writer})], expected_version=version)
    except WrongExpectedVersion:
        return False
    return True


def append_side_by_side(url: str, tenant: str, writer: int, appends: int, barrier: Any) -> int:
    """Append `appends` batches (1 to 3 events) to the store of `tenant` at the side-by-side
    `url`, from two threads, starting with the other processes; every fifth claims a new
    stream that is there already (refused: rolled back in its group). The events
    appended."""
    written = [0, 0]
    with EventStore.open(f"{url}&tenant={tenant}") as store:
        store.append(f"taken-{writer}", [NewEvent("Taken", {"tenant": tenant})])

        def run(thread: int) -> None:
            for n in range(thread, appends, 2):
                size = 1 + n % 3
                events = [
                    NewEvent("Placed", {"tenant": tenant, "writer": writer, "n": n})
                    for _ in range(size)
                ]
                if n % 5 == 4:
                    try:
                        store.append(f"taken-{writer}", events, NO_STREAM)
                    except WrongExpectedVersion:
                        continue
                store.append(f"order-{writer}-{n % 7}", events)
                written[thread] += size

        barrier.wait()
        threads = [threading.Thread(target=run, args=(t,)) for t in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return 1 + sum(written)


def follow_side_by_side(url: str, tenant: str, expected: int, barrier: Any) -> list[str]:
    """Tail the log of `tenant` at the side-by-side `url` while others append, until it holds
    `expected` events; what was wrong: a position that was not the one after the last
    read (a gap or a skip), or an event of another tenant. Empty when all was right."""
    wrong: list[str] = []
    last = 0
    with EventStore.open(f"{url}&tenant={tenant}") as store:
        barrier.wait()
        deadline = time.monotonic() + 240
        while last < expected and time.monotonic() < deadline:
            for event in store.read_all(after=last):
                if event.position != last + 1:
                    wrong.append(f"read {event.position} after {last}")
                if event.data.get("tenant") != tenant:
                    wrong.append(f"{event.position} is {event.data.get('tenant')!r}'s")
                last = event.position
            store.wait_for_events(last, timeout=1.0)
        if last != expected:
            wrong.append(f"read {last} events of {expected}")
    return wrong
