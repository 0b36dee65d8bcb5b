"""`TypeCount`: how many events of one type and schema version the log holds, counted by
the store (`count_types`) without decoding them.

A writer keeps an event's schema version in its metadata (`EVENT_VERSION`); the store
gives it no meaning but this count. Each backend groups its rows by the type and that
value as JSON text, in one statement, and `Tally` reads the text as `verify_stored_events`
does: no value is version 1, a positive int is itself, anything else (`"2"`, `2.5`, `0`)
is 0, a version no code writes. Values that read alike (no value and `1`) are merged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from .events import EVENT_VERSION

NOT_A_VERSION = 0
"""The `event_version` of events whose metadata holds a value that is not a positive int."""

_KEY = f'"{EVENT_VERSION}"'


@dataclass(frozen=True, slots=True)
class TypeCount:
    """The events of one type at one schema version, as the store counted them.

    Example::

        from eventcraft.eventstore import EVENT_VERSION, EventStore, NewEvent, TypeCount

        with EventStore.open("sqlite:///shop.db") as store:
            store.append("order-1", [NewEvent("OrderPlaced", {"cents": 5})])  # no version: 1
            placed = NewEvent("OrderPlaced", {"total": 5}, {EVENT_VERSION: 2})
            store.append("order-2", [placed, NewEvent("OrderPaid", {})])
            counts = store.count_types()
        assert [(c.type, c.event_version, c.events) for c in counts] == [
            ("OrderPaid", 1, 1), ("OrderPlaced", 1, 1), ("OrderPlaced", 2, 1),
        ]
        assert isinstance(counts[0], TypeCount) and counts[0].last_position == 3
    """

    type: str
    """The event type."""
    event_version: int
    """The schema version the events were stored at: their metadata's `EVENT_VERSION`, 1
    when it has none, `NOT_A_VERSION` (0) when it is not a positive int."""
    events: int
    """How many there are."""
    last_position: int
    """The position of the last of them."""
    last_recorded_at: datetime
    """When the last of them was recorded."""


class Tally:
    """Counts per type and stored version, added up from rows or events."""

    def __init__(self) -> None:
        self._counts: dict[tuple[str, int], TypeCount] = {}

    def add(
        self,
        type: str,
        version_text: str | None,
        events: int,
        last_position: int,
        last_recorded_at: datetime | str,
    ) -> None:
        """`events` of `type` whose `EVENT_VERSION` is the JSON `version_text` (None: the
        metadata has none), the last at `last_position`, recorded at `last_recorded_at`
        (a time, or ISO 8601 text as SQLite keeps it)."""
        key = (type, stored_version(version_text))
        moment = (
            datetime.fromisoformat(last_recorded_at)
            if isinstance(last_recorded_at, str)
            else last_recorded_at
        )
        counted = self._counts.get(key)
        if counted is not None:
            if counted.last_position > last_position:
                last_position, moment = counted.last_position, counted.last_recorded_at
            events += counted.events
        self._counts[key] = TypeCount(key[0], key[1], events, last_position, moment)

    def counts(self) -> list[TypeCount]:
        """What was added, by type and version."""
        return [self._counts[key] for key in sorted(self._counts)]


def type_counts(
    rows: Iterable[tuple[str, str | None, int, int, datetime | str]],
) -> list[TypeCount]:
    """The counts of a statement's rows: (type, version text, events, last position, last
    recorded at), as `Tally.add` takes them."""
    tally = Tally()
    for row in rows:
        tally.add(*row)
    return tally.counts()


def schema_version_of(metadata: Mapping[str, Any]) -> int:
    """The schema version an event was stored at, by the rule `count_types` counts with:
    its metadata's `EVENT_VERSION`, 1 when it has none, 0 when it is not a positive int.

    Example::

        from eventcraft.eventstore import EVENT_VERSION, schema_version_of

        assert schema_version_of({}) == 1
        assert schema_version_of({EVENT_VERSION: 3}) == 3
        assert schema_version_of({EVENT_VERSION: "3"}) == 0  # not a version
    """
    return _version(metadata.get(EVENT_VERSION))


def stored_version(text: str | None) -> int:
    """The schema version an `EVENT_VERSION` value, as JSON text, names (module docstring)."""
    if text is None:
        return 1
    try:
        return _version(orjson.loads(text))
    except orjson.JSONDecodeError:
        return NOT_A_VERSION


def _version(value: object) -> int:
    """The one rule: none is version 1, a positive int is itself, anything else is not a
    version."""
    if value is None:
        return 1
    return value if type(value) is int and value > 0 else NOT_A_VERSION


def version_text(metadata: str) -> str | None:
    """The `EVENT_VERSION` value of metadata stored as JSON text, as JSON text."""
    # Most metadata is a few keys without it: finding the key first spares parsing.
    if _KEY not in metadata:
        return None
    value = orjson.loads(metadata).get(EVENT_VERSION)
    return None if value is None else orjson.dumps(value).decode()
