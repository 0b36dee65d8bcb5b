"""`show` of a deleted stream says it was deleted, and when, not that there is no such
stream."""

from __future__ import annotations

from datetime import UTC, datetime

from eventcraft.eventstore import EventStore

from .conftest import Run


def test_show_says_a_deleted_stream_was_deleted_and_when(run: Run, known_url: str) -> None:
    moment = datetime(2026, 3, 1, 12, 30, 5, 250000, tzinfo=UTC)
    with EventStore.open(known_url) as store:
        store.delete_stream("order-2", 2, deleted_at=moment)
        store.delete_stream("order-1", 2, tombstone=True, deleted_at=moment)
    deleted = run("--store", known_url, "show", "order-2")
    assert (deleted.code, deleted.out) == (2, "")
    assert deleted.err == (
        "error: stream 'order-2' was deleted at 2026-03-01 12:30:05.250 UTC, at version 2: "
        "reads show none of its events until it is written again (the global log keeps "
        "them until a retention run removes them)\n"
    )
    tombstoned = run("--store", known_url, "show", "order-1")
    assert tombstoned.err == (
        "error: stream 'order-1' was tombstoned at 2026-03-01 12:30:05.250 UTC, at version 2: "
        "it is deleted for ever (the global log keeps its events until a retention run "
        "removes them)\n"
    )
    never = run("--store", known_url, "show", "order-9")
    assert never.err == "error: no stream 'order-9' in the store\n"
