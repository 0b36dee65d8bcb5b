"""A relay's selection as its state row records it, so other processes count its lag.

A relay's lag is the events after its checkpoint that its categories, types
and query take (`lag_of`, as a projection's). The command line and the
console know a relay only by its rows, so the relay records that selection
beside its state, as JSON text, and they count its lag from it as the
relay's own `status()` does: read-only, at most `LAG_COUNTED` index entries.
`where` (a function) cannot be recorded and is not counted, by either.
"""

from __future__ import annotations

import orjson
from eventcraft.eventstore import Query, QueryItem, RecordedEvent
from eventcraft.projections import Subscription


def recorded(selection: Subscription) -> str:
    """The selection as the state row keeps it: `{"categories", "types", "query"}`, each
    null for any (the query a list of `{"types", "tags"}` items)."""
    query = selection.query
    return orjson.dumps(
        {
            "categories": _listed(selection.categories),
            "types": _listed(selection.types),
            "query": None
            if query is None
            else [{"types": list(i.types), "tags": list(i.tags)} for i in query.items],
        }
    ).decode()


def selection_of(name: str, text: str | None) -> Subscription | None:
    """The selection `recorded` kept for relay `name`, to count its lag with; None if the
    row holds none (written by a release before it did) or not one `recorded` wrote."""
    if text is None:
        return None
    try:
        found = orjson.loads(text)
        query = found["query"]
        return Subscription(
            name,
            _counted_only,
            categories=found["categories"],
            types=found["types"],
            query=None
            if query is None
            else Query([QueryItem(types=i["types"], tags=i["tags"]) for i in query]),
        )
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None


def _listed(names: tuple[str, ...] | None) -> list[str] | None:
    return None if names is None else list(names)


def _counted_only(event: RecordedEvent) -> None:
    raise AssertionError("a recorded selection counts a relay's lag; it delivers nothing")
