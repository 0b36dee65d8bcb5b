"""`verify_stored_events`: every stored event decoded and upcast through today's registry.

The compatibility check (`compatibility.py`) judges a change from the schemas; this
reads what is really stored. Each event goes through the registry as projections,
process managers and Spark's typed columns take it (`EventRegistry.decode`: upcast
when it is older, then validated into today's class), and is counted by its type and
stored schema version (`schema_version_of`, the rule `EventStore.count_types` counts
by). The counts say what is left of each version ("can the upcaster from v1 go?":
when no v1 event remains), and each failure is kept with its position and error.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime

from eventcraft.eventstore import EventStore, RecordedEvent, schema_version_of

from .errors import EventDecodingError
from .registry import EventRegistry

_WINDOW = 100
"""A sample reads windows of this many consecutive events, spread over the log."""


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
    events = _sampled(store, after, sample) if sample is not None else store.read_all(after, limit)
    types = registry.types
    decode = registry.decode
    for event in events:
        key = (event.type, schema_version_of(event.metadata))
        counted = counts.get(key)
        if counted is None:
            entry = types.get(event.type)
            counted = counts[key] = StoredTypeVersion(
                key[0], key[1], registered_version=entry.version if entry else None
            )
        counted.events += 1
        counted.last_position = event.position
        counted.last_recorded_at = event.recorded_at
        try:
            decode(event)
        except EventDecodingError as error:
            counted.failed += 1
            if counted.first_failure is None:
                counted.first_failure = event.position
                counted.error = str(error)
    result.counts = [counts[key] for key in sorted(counts)]
    result.events = sum(c.events for c in result.counts)
    result.failed = sum(c.failed for c in result.counts)
    result.upto = max((c.last_position for c in result.counts), default=after)
    return result


def _sampled(store: EventStore, after: int, sample: int) -> Iterator[RecordedEvent]:
    head = store.high_water_mark()
    span = head - after
    if span <= 0:
        return
    windows = max(1, -(-sample // _WINDOW))
    step = max(span // windows, _WINDOW)
    start = after
    last = after
    while start < head:
        for event in store.read_all(max(start, last), _WINDOW):
            last = event.position
            yield event
        start += step
