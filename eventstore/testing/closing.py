"""The conformance suite's tests of a closed store: one error, whatever the backend."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from ..events import ANY
from ..query import Query, QueryItem
from ..store import EventStore
from .events import events

CLOSED = "StoreUnavailable: the event store is closed"
"""What every call of a closed store raises, on every backend."""


class ClosingConformance:
    """Needs a `store` fixture: a new, empty store."""

    def test_every_call_of_a_closed_store_says_it_is_closed(self, store: EventStore) -> None:
        store.append("order-1", events("Placed"))
        store.close()
        calls: dict[str, Callable[[], object]] = {
            "append": lambda: store.append("order-1", events("Paid")),
            "append_many": lambda: store.append_many([("order-2", events("Placed"), ANY)]),
            "read_stream": lambda: list(store.read_stream("order-1")),
            "read_stream_encoded": lambda: list(store.read_stream_encoded("order-1")),
            "read_all": lambda: list(store.read_all()),
            "read_all_encoded": lambda: list(store.read_all_encoded()),
            "read_query": lambda: store.read_query(Query([QueryItem(types=["Placed"])])),
            "read_event": lambda: store.read_event(uuid.uuid4()),
            "high_water_mark": store.high_water_mark,
            "log_status": store.log_status,
            "wait_for_events": lambda: store.wait_for_events(after=0, timeout=0.01),
            "stream_version": lambda: store.stream_version("order-1"),
            "list_streams": lambda: list(store.list_streams()),
            "save_snapshot": lambda: store.save_snapshot("order-1", version=1, type="O", data={}),
            "load_snapshot": lambda: store.load_snapshot("order-1"),
            "delete_stream": lambda: store.delete_stream("order-1"),
            "stream_deletion": lambda: store.stream_deletion("order-1"),
            "placed_deletions": lambda: store.placed_deletions(),
        }
        said = {name: _outcome(call) for name, call in calls.items()}
        otherwise = {name: outcome for name, outcome in said.items() if outcome != CLOSED}
        assert not otherwise, f"calls that did not raise {CLOSED!r}: {otherwise}"
        store.close()  # closing again does nothing


def _outcome(call: Callable[[], object]) -> str:
    try:
        call()
    except Exception as error:  # what each call raised, to compare them all at once
        return f"{type(error).__name__}: {error}"
    return "no error"
