"""A reader that tails the global log while writer processes append."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future

from eventcraft.eventstore import EventStore


def tail_until_written(store: EventStore, writers: Sequence[Future[list[str]]]) -> None:
    """Tail `read_all` until every writer is done; assert it saw what they wrote, once, in order.

    Each writer returns the ids of the events it committed.
    """
    seen: list[tuple[int, str]] = []
    last = 0
    while True:
        done = all(w.done() for w in writers)  # decided before the pass, so it is the final one
        for event in store.read_all(after=last):
            seen.append((event.position, str(event.id)))
            last = event.position
        if done:
            break
    positions = [p for p, _ in seen]
    assert positions == sorted(positions), "the reader saw positions out of order"
    assert len(set(positions)) == len(positions), "the reader saw an event twice"
    final = [(e.position, str(e.id)) for e in store.read_all()]
    assert seen == final, "the tailing reader skipped events the log holds"
    assert {i for _, i in seen} == {i for w in writers for i in w.result()}
