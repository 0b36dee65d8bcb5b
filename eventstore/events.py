"""What goes into the store and what comes out of it."""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import MISSING, dataclass, field, fields, make_dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any, NamedTuple, TypeVar

from pydantic import BaseModel

from .ids import new_event_id


class StreamState(enum.Enum):
    """Expected versions that are not a number.

    Example::

        from eventcraft.eventstore import ANY, NO_STREAM, ExpectedVersion, StreamState


        def expected_text(expected: ExpectedVersion) -> str:  # for a log line or a metric's label
            return expected.value if isinstance(expected, StreamState) else str(expected)


        assert [expected_text(e) for e in (ANY, NO_STREAM, 3)] == ["any", "no_stream", "3"]
    """

    ANY = "any"
    """No check: append whatever the stream's version."""
    NO_STREAM = "no_stream"
    """The stream must hold no events yet."""

    def __repr__(self) -> str:
        return self.name


ANY = StreamState.ANY
"""An expected version that checks nothing: the append is taken whatever the stream's
version (`StreamState.ANY`).

Example::

    from eventcraft.eventstore import ANY, EventStore, NewEvent

    with EventStore.open("sqlite:///shop.db") as store:  # an audit trail takes every entry
        store.append("audit-1", [NewEvent("LoggedIn", {"user": "ann"})], expected_version=ANY)
        store.append("audit-1", [NewEvent("LoggedOut", {"user": "ann"})], expected_version=ANY)
        assert store.stream_version("audit-1") == 2
"""
NO_STREAM = StreamState.NO_STREAM
"""An expected version that the stream holds no events yet (`StreamState.NO_STREAM`).

Example::

    from eventcraft.eventstore import NO_STREAM, EventStore, NewEvent, WrongExpectedVersion

    with EventStore.open("sqlite:///shop.db") as store:  # a user name is claimed once
        claim = NewEvent("Claimed", {"by": "u1"})
        store.append("username-ann", [claim], expected_version=NO_STREAM)
        try:
            claim = NewEvent("Claimed", {"by": "u2"})
            store.append("username-ann", [claim], expected_version=NO_STREAM)
        except WrongExpectedVersion as error:
            assert error.actual == 1
        assert [e.data["by"] for e in store.read_stream("username-ann")] == ["u1"]
"""

ExpectedVersion = int | StreamState
"""`ANY`, `NO_STREAM`, or the stream's exact current version (0 also means no events).

Example::

    from eventcraft.eventstore import NO_STREAM, EventStore, ExpectedVersion, NewEvent


    def place(store: EventStore, order_id: str, expected: ExpectedVersion = NO_STREAM) -> int:
        return store.append(order_id, [NewEvent("Placed", {})], expected).version


    with EventStore.open("sqlite:///shop.db") as store:
        assert place(store, "order-1") == 1
        assert place(store, "order-1", expected=1) == 2  # the version a decision read
"""

MAX_STREAM_VERSION = 2**31 - 1
"""The most events a stream holds on PostgreSQL, whose versions are 4-byte integers; an
append past it raises `StreamFull`. SQLite and memory stores have no such bound.

Example::

    from eventcraft.eventstore import MAX_STREAM_VERSION, EventStore, NewEvent

    with EventStore.open("sqlite:///shop.db") as store:
        store.append("ledger-2026", [NewEvent("Entered", {"cents": 500})])
        # A health check: how full the stream is, measured where PostgreSQL's versions end.
        fullness = store.stream_version("ledger-2026") / MAX_STREAM_VERSION
        assert fullness < 0.9
"""

EVENT_VERSION = "event_version"
"""The metadata key under which a writer keeps the schema version of an event's data.

The store gives it no meaning but one: `read_stream_encoded` returns it
without the rest of the metadata, for readers that upcast old payloads.

Example::

    from eventcraft.eventstore import EVENT_VERSION, EventStore, NewEvent

    with EventStore.open("sqlite:///shop.db") as store:
        store.append("order-1", [NewEvent("Placed", {"cents": 500})])  # before version 2
        placed = NewEvent("Placed", {"total": {"cents": 500}}, metadata={EVENT_VERSION: 2})
        store.append("order-1", [placed])
        versions = [e.event_version for e in store.read_stream_encoded("order-1")]
        assert versions == [None, "2"]  # as JSON text: an upcaster steps the first one up
"""


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event to append.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent
        from pydantic import BaseModel


        class OrderPlaced(BaseModel):
            cents: int


        placed = NewEvent(
            "OrderPlaced",
            OrderPlaced(cents=1250),
            metadata={"correlation_id": "req-42"},
            tags=["customer:c7"],
        )
        with EventStore.open("sqlite:///shop.db") as store:
            store.append("order-1", [placed])
            (event,) = store.read_stream("order-1")
        assert (event.id, event.data, event.tags) == (placed.id, {"cents": 1250}, ("customer:c7",))
    """

    type: str
    """The event's type name, stable across refactorings (not a Python class path)."""
    data: dict[str, Any] | BaseModel
    """The payload: a JSON-encodable dict, or a pydantic model serialized through its schema."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Context of the event: `correlation_id`, `causation_id` and whatever the caller adds."""
    id: uuid.UUID = field(default_factory=new_event_id)
    """Unique across the store; resending the same ids makes a retry safe."""
    recorded_at: datetime | None = None
    """When the event was recorded, timezone-aware: None (the usual) for when the store
    writes it. Given by an import, which keeps the time an event was first written."""
    tags: Sequence[str] = ()
    """Names of what the event concerns beyond its stream (`course:c1`, `student:s7`), which
    queries and append conditions select events by (`Query`, `AppendCondition`). A set:
    the store keeps each once, sorted."""


class EncodedEvent(NamedTuple):
    """An event of a stream as stored, its data left as JSON text.

    For readers that decode payloads straight into their own types (the
    domain repository does, with pydantic) and need nothing else: no dicts,
    ids or timestamps are built for them, and of the metadata only its
    `event_version` is read.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent
        from pydantic import BaseModel


        class Placed(BaseModel):
            cents: int


        with EventStore.open("sqlite:///shop.db") as store:
            store.append("order-1", [NewEvent("Placed", Placed(cents=500))])
            (encoded,) = store.read_stream_encoded("order-1")
        assert (encoded.version, encoded.type, encoded.event_version) == (1, "Placed", None)
        assert Placed.model_validate_json(encoded.data) == Placed(cents=500)  # no dict between
    """

    version: int
    """Its position within the stream, from 1."""
    type: str
    """The event's type name."""
    data: str
    """The payload: a JSON object."""
    event_version: str | None
    """The metadata's `EVENT_VERSION` as JSON text (`"2"`), or None if it has none."""


class EncodedRecord(NamedTuple):
    """An event of the log with every field as stored, for readers that write it out again.

    Nothing is decoded: no dicts, UUIDs or datetimes are built, which makes
    a full pass over the log (an export) several times cheaper than
    `read_all`. The JSON text is the backend's own: PostgreSQL gives jsonb's
    key order and spacing, so compare it as JSON, not as text.

    Example::

        import json

        from eventcraft.eventstore import EventStore, NewEvent

        with EventStore.open("sqlite:///shop.db") as store:
            store.append("order-1", [NewEvent("Placed", {"cents": 500}, tags=["customer:c7"])])
            (record,) = store.read_all_encoded()
        # Its data is JSON text already: a line written out takes it as it is.
        line = f'{{"stream_id": {json.dumps(record.stream_id)}, "data": {record.data}}}'
        assert json.loads(line) == {"stream_id": "order-1", "data": {"cents": 500}}
        assert (record.position, record.version, record.tags) == (1, 1, ("customer:c7",))
    """

    position: int
    id: str
    """The event id as text, lower-case hex with hyphens."""
    stream_id: str
    version: int
    type: str
    data: str
    """The payload as JSON text (an object)."""
    metadata: str
    """The metadata as JSON text (an object)."""
    recorded_at: str
    """ISO 8601 in UTC with microseconds, `2026-11-23T21:52:16.625876+00:00`
    (what `recorded_at_text` makes of a datetime)."""
    tags: tuple[str, ...] = ()
    """Its tags, sorted, as `RecordedEvent.tags`: the one field given decoded, because
    the backends store them in forms of their own (an array, JSON text) and an untagged
    event, the usual, costs nothing this way (the same empty tuple)."""


def recorded_at_text(moment: datetime) -> str:
    """`moment` as `EncodedRecord.recorded_at` gives it: UTC, always six fraction digits.

    Example::

        from datetime import datetime, timedelta, timezone

        from eventcraft.eventstore import EventStore, NewEvent, recorded_at_text

        paris = timezone(timedelta(hours=1))
        assert recorded_at_text(datetime(2026, 1, 2, 9, 30, tzinfo=paris)) == (
            "2026-01-02T08:30:00.000000+00:00"
        )
        with EventStore.open("sqlite:///shop.db") as store:
            store.append("order-1", [NewEvent("Placed", {})])
            (event,), (record,) = store.read_all(), store.read_all_encoded()
        assert recorded_at_text(event.recorded_at) == record.recorded_at
    """
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


@dataclass(frozen=True, slots=True)
class RecordedEvent:
    """An event as stored. Never changes once written.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent

        with EventStore.open("sqlite:///shop.db") as store:
            store.append("order-1", [NewEvent("Placed", {"cents": 500}), NewEvent("Paid", {})])
            placed, paid = store.read_stream("order-1")
        assert (placed.stream_id, placed.category, placed.version) == ("order-1", "order", 1)
        assert (placed.type, placed.data) == ("Placed", {"cents": 500})
        assert paid.position > placed.position and paid.recorded_at.tzinfo is not None
    """

    id: uuid.UUID
    """The id the event was appended with."""
    stream_id: str
    """The stream it belongs to, `category-id`."""
    version: int
    """Its position within the stream, from 1."""
    position: int
    """Its position in the global log: strictly increasing in commit-visible order."""
    type: str
    """The event's type name."""
    data: dict[str, Any]
    """The decoded payload."""
    metadata: dict[str, Any]
    """The decoded metadata."""
    recorded_at: datetime
    """When the store wrote it, timezone-aware (UTC)."""
    tags: tuple[str, ...] = ()
    """Its tags, sorted."""

    @property
    def category(self) -> str:
        return category_of(self.stream_id)


# A frozen dataclass sets each field through `object.__setattr__`, three times the cost
# of a plain one's `__init__`: 0.6 us of an event's 2-3 us on a read. The backends build
# a page's events as this twin (the same fields, so the same slots, made from
# RecordedEvent's own) and then give each its class, which Python allows between
# classes of one layout: a RecordedEvent, frozen from then on, for a third of the cost.
UnsealedEvent = make_dataclass(
    "UnsealedEvent",
    [
        (f.name, f.type) if f.default is MISSING else (f.name, f.type, field(default=f.default))
        for f in fields(RecordedEvent)
    ],
    slots=True,
)
"""`RecordedEvent`'s twin, not frozen: build one, then set its `__class__` to RecordedEvent."""


_Stored = TypeVar("_Stored", bound=Hashable)
_Made = TypeVar("_Made")


def made_once_each(make: Callable[[_Stored], _Made], column: Sequence[_Stored]) -> Iterator[_Made]:
    """`map(make, column)` with `make` called once per distinct value: for a page's
    times, which the events of one append share."""
    made = {value: make(value) for value in set(column)}
    return map(made.__getitem__, column)


def encoded_events(rows: Iterable[Sequence[Any]]) -> list[EncodedEvent]:
    """`EncodedEvent`s of rows of (version, type, data, event_version), unchecked."""
    return list(map(_encoded, rows))


# tuple.__new__ straight from C: _make would check each row's length in Python.
_encoded = partial(tuple.__new__, EncodedEvent)


def recorded_events(*columns: Iterable[Any]) -> list[RecordedEvent]:
    """`RecordedEvent`s of a page given column by column (ids, stream ids, ... tags),
    unchecked, for a third of the cost: the columns are walked in C."""
    events = list(map(UnsealedEvent, *columns))
    for event in events:
        event.__class__ = RecordedEvent
    return events


@dataclass(frozen=True, slots=True)
class AppendResult:
    """What an append did: also what a retried append returns again.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent

        with EventStore.open("sqlite:///shop.db") as store:
            store.append("cart-7", [NewEvent("Opened", {})])
            result = store.append("order-1", [NewEvent("Placed", {}), NewEvent("Paid", {})])
            assert (result.version, result.positions) == (2, (2, 3))
            # The version is the next append's expected version.
            store.append("order-1", [NewEvent("Shipped", {})], expected_version=result.version)
    """

    version: int
    """The stream's version after the append: the version of its last event."""
    positions: tuple[int, ...]
    """The global positions given to the appended events, in order."""


@dataclass(frozen=True, slots=True)
class StreamInfo:
    """A stream in a listing.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent

        with EventStore.open("sqlite:///shop.db") as store:
            for stream_id in ("order-1", "order-2", "cart-7"):
                store.append(stream_id, [NewEvent("Opened", {})])
            store.append("order-2", [NewEvent("Paid", {})])
            orders = list(store.list_streams(category="order"))
        assert [(s.stream_id, s.version) for s in orders] == [("order-1", 1), ("order-2", 2)]
    """

    stream_id: str
    version: int
    """The stream's current version: how many events it holds."""


def category_of(stream_id: str) -> str:
    """The part of a stream id before the first `-` (the whole id if it has none).

    Example::

        from eventcraft.eventstore import EventStore, NewEvent, category_of

        assert category_of("order-eu-1") == "order"
        assert category_of("audit") == "audit"
        with EventStore.open("sqlite:///shop.db") as store:
            store.append("order-eu-1", [NewEvent("Placed", {})])
            store.append("cart-7", [NewEvent("Opened", {})])
            orders = list(store.read_all(categories=category_of("order-eu-1")))
        assert [e.stream_id for e in orders] == ["order-eu-1"]
    """
    return stream_id.split("-", 1)[0]


def category_range(category: str) -> tuple[str, str]:
    """The range [low, high) of stream ids, in code point order (the stores' collation),
    that holds every stream of `category`: the id `category` itself and the ids that
    start `category-`, which sort below `category.`. Ids of other categories may fall in
    it too (`category!x`), so a read by it checks the category as well."""
    return category, category + "."
