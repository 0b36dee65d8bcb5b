"""`verify_stored_events`: every stored event decoded and upcast through today's registry.

The compatibility check (`compatibility.py`) judges a change from the schemas; this
reads what is really stored. Each event goes through the registry as a repository
loads it (`EventRegistry.decode_encoded`: upcast when it is older, then validated into
today's class, by the rules `EventRegistry.decode` keeps for projections), and is
counted by its type and stored schema version (`schema_version_of`, the rule
`EventStore.count_types` counts by). The counts say what is left of each version ("can
the upcaster from v1 go?": when no v1 event remains), and each failure is kept with its
position and error.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from itertools import islice

import orjson
from eventcraft.eventstore import (
    EVENT_VERSION,
    EncodedEvent,
    EncodedRecord,
    EventStore,
    schema_version_of,
)
from pydantic import ValidationError

from .errors import EventDecodingError
from .registry import EventRegistry, not_fitting

_WINDOW = 100
"""A sample reads windows of this many consecutive events, spread over the log."""
_VERSION_KEY = f'"{EVENT_VERSION}"'


@dataclass(slots=True)
class StoredTypeVersion:
    """The stored events of one type at one schema version, as read through the registry.

    Example::

        from eventcraft.domain import DomainEvent, EventRegistry, verify_stored_events
        from eventcraft.eventstore import EventStore

        registry = EventRegistry()

        @registry.event("OrderPlaced")
        class OrderPlaced(DomainEvent):
            cents: int

        with EventStore.open("sqlite:///shop.db") as store:
            store.append("order-1", [registry.to_new_event(OrderPlaced(cents=5), {})])
            (counted,) = verify_stored_events(store, registry).counts
        assert (counted.event_type, counted.version, counted.events) == ("OrderPlaced", 1, 1)
        assert counted.failed == 0 and counted.last_position == 1
    """

    event_type: str
    version: int
    """The schema version the events were stored at (1 when their metadata names none)."""
    events: int = 0
    failed: int = 0
    """How many of them do not decode."""
    first_failure: int | None = None
    """The position of the first that does not."""
    error: str | None = None
    """Why it does not."""
    last_position: int = 0
    """The position of the last one read."""
    last_recorded_at: datetime | None = None
    """When the last one read was written."""
    registered_version: int | None = None
    """The version today's code reads it into; None when no class is registered."""


@dataclass(slots=True)
class StoredEventsVerification:
    """What `verify_stored_events` found: counts per type and version, and failures.

    Example::

        from eventcraft.domain import DomainEvent, EventRegistry, verify_stored_events
        from eventcraft.eventstore import EventStore, NewEvent

        registry = EventRegistry()

        @registry.event("OrderPlaced")
        class OrderPlaced(DomainEvent):
            cents: int

        with EventStore.open("sqlite:///shop.db") as store:
            store.append("order-1", [NewEvent("OrderPlaced", {"cents": "five"})])
            found = verify_stored_events(store, registry)
        assert not found.ok and (found.events, found.failed) == (1, 1)
        assert "does not fit OrderPlaced" in found.counts[0].error
    """

    counts: list[StoredTypeVersion] = field(default_factory=list)
    """One entry per stored (type, version), by type name and version."""
    events: int = 0
    """How many events were read."""
    failed: int = 0
    after: int = 0
    """The position the read started after."""
    upto: int = 0
    """The last position read."""
    sampled: bool = False
    """Whether only a sample of the log was read."""

    @property
    def ok(self) -> bool:
        """Every event read decodes."""
        return self.failed == 0


def verify_stored_events(
    store: EventStore,
    registry: EventRegistry,
    *,
    after: int = 0,
    limit: int | None = None,
    sample: int | None = None,
) -> StoredEventsVerification:
    """Reads the stored events after position `after` (at most `limit` of them) through
    `registry`, counting them by type and stored version and keeping each failure.

    With `sample`, about that many events are read, in windows of 100 consecutive
    events spread evenly over the log, instead of every one.

    Example::

        from eventcraft.domain import DomainEvent, EventRegistry, verify_stored_events
        from eventcraft.eventstore import EventStore

        registry = EventRegistry()

        @registry.event("OrderPlaced", version=2)
        class OrderPlaced(DomainEvent):
            cents: int

        @registry.upcaster("OrderPlaced", from_version=1)
        def to_v2(data: dict) -> dict:
            return {"cents": data["euros"] * 100}

        with EventStore.open("sqlite:///shop.db") as store:
            store.append("order-1", [registry.to_new_event(OrderPlaced(cents=500), {})])
            found = verify_stored_events(store, registry)
        assert found.ok and [(c.version, c.events) for c in found.counts] == [(2, 1)]
    """
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be a positive number of events, not {limit!r}")
    if sample is not None and sample < 1:
        raise ValueError(f"sample must be a positive number of events, not {sample!r}")
    result = StoredEventsVerification(after=after, upto=after, sampled=sample is not None)
    counts: dict[tuple[str, int], StoredTypeVersion] = {}
    last: dict[tuple[str, int], EncodedRecord] = {}
    versions: dict[str | None, int] = {None: 1}
    if sample is not None:
        records = _sampled(store, after, sample)
    else:
        records = _first(store.read_all_encoded(after), limit)
    types = registry.types  # a copy, once
    decode = registry.decode_encoded
    for record in records:
        # The rows as stored, each decoded from its JSON text straight into its class (as a
        # repository loads a stream): a verify reads the whole log, and building every
        # event's dicts, UUID and datetime first would cost more than the decoding.
        stored_text = _version_text(record.metadata)
        version = versions.get(stored_text)
        if version is None:
            version = versions[stored_text] = _version(stored_text)
        key = (record.type, version)
        counted = counts.get(key)
        if counted is None:
            entry = types.get(record.type)
            counted = counts[key] = StoredTypeVersion(
                key[0], key[1], registered_version=entry.version if entry else None
            )
        counted.events += 1
        last[key] = record
        entry = types.get(record.type)
        try:
            if entry is not None and stored_text == entry.version_text:
                # At today's version, the most common case: `decode_encoded`'s first step,
                # its validator called here (an EncodedEvent is made only to name a failure).
                try:
                    entry.cls.__pydantic_validator__.validate_json(record.data)
                except ValidationError as invalid:
                    encoded = EncodedEvent(record.version, record.type, record.data, stored_text)
                    raise not_fitting(encoded, record.stream_id, entry, invalid) from None
            else:
                encoded = EncodedEvent(record.version, record.type, record.data, stored_text)
                decode(encoded, record.stream_id)
        except EventDecodingError as error:
            counted.failed += 1
            if counted.first_failure is None:
                counted.first_failure = record.position
                counted.error = str(error)
    for key, record in last.items():
        counts[key].last_position = record.position
        counts[key].last_recorded_at = datetime.fromisoformat(record.recorded_at)
    result.counts = [counts[key] for key in sorted(counts)]
    result.events = sum(c.events for c in result.counts)
    result.failed = sum(c.failed for c in result.counts)
    result.upto = max((c.last_position for c in result.counts), default=after)
    return result


def _version_text(metadata: str) -> str | None:
    """The metadata's `EVENT_VERSION` as JSON text, None when it has none."""
    # Most metadata holds a few keys and no version: finding the key first spares parsing.
    if _VERSION_KEY not in metadata:
        return None
    value = orjson.loads(metadata).get(EVENT_VERSION)
    return None if value is None else orjson.dumps(value).decode()


def _version(stored_text: str | None) -> int:
    """The stored schema version by `schema_version_of`'s rule, which `count_types` keeps."""
    if stored_text is None:
        return 1
    return schema_version_of({EVENT_VERSION: orjson.loads(stored_text)})


def _first(records: Iterator[EncodedRecord], limit: int | None) -> Iterator[EncodedRecord]:
    if limit is None:
        yield from records
        return
    try:
        yield from islice(records, limit)
    finally:
        _close(records)


def _close(records: Iterator[EncodedRecord]) -> None:
    """End a read left before its end: its cursor, on PostgreSQL, goes with it."""
    close = getattr(records, "close", None)
    if close is not None:
        close()


def _sampled(store: EventStore, after: int, sample: int) -> Iterator[EncodedRecord]:
    head = store.high_water_mark()
    span = head - after
    if span <= 0:
        return
    windows = max(1, -(-sample // _WINDOW))
    step = max(span // windows, _WINDOW)
    start = after
    last = after
    while start < head:
        for record in _first(store.read_all_encoded(max(start, last)), _WINDOW):
            last = record.position
            yield record
        start += step
