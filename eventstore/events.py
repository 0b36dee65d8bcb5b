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
    """Expected versions that are not a number."""

    ANY = "any"
    """No check: append whatever the stream's version."""
    NO_STREAM = "no_stream"
    """The stream must hold no events yet."""

    def __repr__(self) -> str:
        return self.name


ANY = StreamState.ANY
"""An expected version that checks nothing: the append is taken whatever the stream's
version (`StreamState.ANY`)."""
NO_STREAM = StreamState.NO_STREAM
"""An expected version that the stream holds no events yet (`StreamState.NO_STREAM`)."""

ExpectedVersion = int | StreamState
"""`ANY`, `NO_STREAM`, or the stream's exact current version (0 also means no events)."""

MAX_STREAM_VERSION = 2**31 - 1
"""The most events a stream holds on PostgreSQL, whose versions are 4-byte integers; an
append past it raises `StreamFull`. SQLite and memory stores have no such bound."""

EVENT_VERSION = "event_version"
"""The metadata key under which a writer keeps the schema version of an event's data.

The store gives it no meaning but one: `read_stream_encoded` returns it
without the rest of the metadata, for readers that upcast old payloads.
"""


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event to append."""

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
    """`moment` as `EncodedRecord.recorded_at` gives it: UTC, always six fraction digits."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


@dataclass(frozen=True, slots=True)
class RecordedEvent:
    """An event as stored. Never changes once written."""

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
    """What an append did: also what a retried append returns again."""

    version: int
    """The stream's version after the append: the version of its last event."""
    positions: tuple[int, ...]
    """The global positions given to the appended events, in order."""


@dataclass(frozen=True, slots=True)
class StreamInfo:
    """A stream in a listing."""

    stream_id: str
    version: int
    """The stream's current version: how many events it holds."""


def category_of(stream_id: str) -> str:
    """The part of a stream id before the first `-` (the whole id if it has none)."""
    return stream_id.split("-", 1)[0]


def category_range(category: str) -> tuple[str, str]:
    """The range [low, high) of stream ids, in code point order (the stores' collation),
    that holds every stream of `category`: the id `category` itself and the ids that
    start `category-`, which sort below `category.`. Ids of other categories may fall in
    it too (`category!x`), so a read by it checks the category as well."""
    return category, category + "."
