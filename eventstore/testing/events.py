"""What the conformance suite appends: events of given types, numbered events, a large
batch's size."""

from __future__ import annotations

from ..events import NewEvent


def events(*types: str, **data: object) -> list[NewEvent]:
    """New events of the given types, each carrying `data`."""
    return [NewEvent(type=t, data=dict(data)) for t in types]


LARGE = 1001
"""Events in a large batch: more than PostgreSQL writes in one call, so it writes them in
parts, in one transaction."""


def many(count: int) -> list[NewEvent]:
    """`count` new events numbered by their `n`."""
    return [NewEvent("Numbered", {"n": n}) for n in range(count)]
