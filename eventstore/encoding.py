"""Checking and serializing events before any backend sees them.

Every backend receives the same `PreparedBatch`, so each rule about bad
input is enforced once: before a transaction starts, but for the encoding of
a large batch, which a backend may interleave with writing it, in a
transaction it rolls back when an event cannot be encoded. Either way a
refused batch has written nothing.
"""

from __future__ import annotations

import dataclasses
import math
import uuid
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

import orjson
from pydantic import BaseModel
from pydantic_core import PydanticSerializationError, to_jsonable_python

from .errors import InvalidEvent
from .events import NewEvent, StreamState

MAX_NAME_LENGTH = 255
"""Longest stream id or event type, in characters."""

MAX_BATCH = 100_000
"""Most events in one append."""

MAX_EVENT_BYTES = 4 * 1024 * 1024
"""Default for the most bytes of JSON an event's data and metadata may take together.

A store opened with `max_event_bytes=` has its own limit.

Example::

    from eventcraft.eventstore import MAX_EVENT_BYTES, EventStore, InvalidEvent, NewEvent

    with EventStore.open("sqlite:///shop.db") as store:
        assert store.max_event_bytes == MAX_EVENT_BYTES  # 4 MiB: keep files elsewhere
        try:
            store.append("doc-1", [NewEvent("Uploaded", {"body": "x" * MAX_EVENT_BYTES})])
        except InvalidEvent as error:
            assert "the store's limit is 4194304 (max_event_bytes)" in str(error)
        assert store.stream_version("doc-1") == 0
"""

MAX_INT = 2**63 - 1
"""Largest version, position or limit: both databases keep them as 64-bit signed integers.

Example::

    from eventcraft.eventstore import MAX_INT, EventStore, NewEvent


    def since(store: EventStore, stream_id: str, version: str) -> list[str]:
        # ?from_version= of a request: a number past any version reads nothing, no error
        start = min(int(version), MAX_INT)
        return [e.type for e in store.read_stream(stream_id, from_version=start)]


    with EventStore.open("sqlite:///shop.db") as store:
        store.append("order-1", [NewEvent("Placed", {}), NewEvent("Paid", {})])
        assert since(store, "order-1", "2") == ["Paid"]
        assert since(store, "order-1", "99999999999999999999") == []
"""

# PostgreSQL's text and jsonb cannot hold NUL; refusing it everywhere keeps
# the backends interchangeable.
_JSON_NUL = b"\\u0000"


class PreparedEvent(NamedTuple):
    """A `NewEvent` checked and encoded, ready for any backend.

    A named tuple: one is made for every event appended, and a frozen
    dataclass costs four `object.__setattr__` calls to build.
    """

    id: uuid.UUID
    type: str
    data: bytes
    """The payload as JSON (an object)."""
    metadata: bytes
    """The metadata as JSON (an object)."""
    recorded_at: datetime | None
    """The time given to keep (in UTC), or None for the time of the append."""
    tags: tuple[str, ...]
    """Checked, sorted, each once."""


def check_name(what: str, value: object) -> str:
    """Return `value` if the store can hold it as a stream id or event type, else raise.

    The rules for names looked up. A name written for the first time must
    also pass `check_new_name`; a stream written before that rule existed
    stays readable.

    Example::

        from eventcraft.eventstore import InvalidEvent, check_name

        # A stream id typed into a search form is looked up: it must pass the rules
        # every stored name passes, not check_new_name's, which older names may break.
        assert check_name("stream id", "order-1") == "order-1"
        try:
            check_name("stream id", "order-" + "1" * 300)
        except InvalidEvent as error:
            reason = str(error)
        assert reason.startswith("stream id is 306 characters long; the limit is 255")
    """
    if not isinstance(value, str):
        raise InvalidEvent(f"{what} must be a str, not {type(value).__name__}: {value!r}")
    if not value:
        raise InvalidEvent(f"{what} must not be empty")
    if len(value) > MAX_NAME_LENGTH:
        raise InvalidEvent(
            f"{what} is {len(value)} characters long; the limit is {MAX_NAME_LENGTH}: "
            f"{value[:40]!r}..."
        )
    if "\x00" in value:
        raise InvalidEvent(f"{what} must not contain a NUL character: {value!r}")
    if not value.isascii():
        try:
            value.encode()
        except UnicodeEncodeError as error:
            raise InvalidEvent(
                f"{what} is not valid Unicode text ({error.reason}): {value!r}"
            ) from error
    return value


def check_new_name(what: str, value: object) -> str:
    """Return `value` if it may name a new stream or event type, else raise.

    Beyond `check_name`: no control characters and no whitespace at either
    end, which look like another name when printed or are lost when a name
    is copied from a log line.

    Example::

        from eventcraft.eventstore import InvalidEvent, check_name, check_new_name

        typed = "OrderPlaced "  # pasted with a space after it
        assert check_name("event type", typed) == typed  # may be looked up
        try:
            check_new_name("event type", typed)  # may not name a new type
        except InvalidEvent as error:
            reason = str(error)
        assert reason == "event type must not begin or end with whitespace: 'OrderPlaced '"
    """
    name = check_name(what, value)
    # One C-speed test for the common case: isprintable() is False for every
    # control character and for all whitespace but the plain space.
    if not (name.isprintable() and name[0] != " " and name[-1] != " "):
        _refuse_unprintable(what, name)
    return name


def check_stream_id(value: object) -> str:
    """Return `value` if it may name a new stream, else raise.

    Example::

        from eventcraft.eventstore import InvalidEvent, check_stream_id

        assert check_stream_id("order-42") == "order-42"
        try:
            check_stream_id("-42")  # an order id that lost its category
        except InvalidEvent as error:
            reason = str(error)
        assert "its category, the part before the first '-', would be empty" in reason
    """
    stream_id = check_new_name("stream id", value)
    if stream_id[0] == "-":
        raise InvalidEvent(
            f"stream id must not start with '-': its category, the part before the first "
            f"'-', would be empty: {stream_id!r}"
        )
    return stream_id


def _refuse_unprintable(what: str, name: str) -> None:
    for index, char in enumerate(name):
        code = ord(char)
        if code < 0x20 or 0x7F <= code < 0xA0:
            raise InvalidEvent(
                f"{what} must not contain control characters (newlines, tabs and the like), "
                f"found {char!r} at index {index}: {name!r}"
            )
    if not name.strip():
        raise InvalidEvent(f"{what} must not be only whitespace: {name!r}")
    if name != name.strip():
        raise InvalidEvent(f"{what} must not begin or end with whitespace: {name!r}")
    # Otherwise printable enough: format characters (emoji joiners), or
    # whitespace such as a no-break space inside the name.


MAX_TAGS = 100
"""Most tags an event, or a query item, may carry."""


def check_tags(where: str, tags: object) -> tuple[str, ...]:
    """`tags` as the store keeps them: each checked as a new name, sorted, each once.

    A set of tags has no order; sorting makes equal sets equal tuples, which
    reads return and exports write alike on every backend.
    """
    if isinstance(tags, str | bytes) or not isinstance(tags, Iterable):
        raise InvalidEvent(
            f"{where}: tags must be a list or set of str, not {type(tags).__name__}: {tags!r:.80}"
        )
    checked = {check_new_name(f"{where}: a tag", tag) for tag in tags}
    if len(checked) > MAX_TAGS:
        raise InvalidEvent(f"{where}: {len(checked)} tags; the limit is {MAX_TAGS}")
    return tuple(sorted(checked))


def check_expected_version(stream_id: str, expected: object) -> int | StreamState:
    if isinstance(expected, StreamState):
        return expected
    if isinstance(expected, bool) or not isinstance(expected, int):
        raise InvalidEvent(
            f"expected_version for stream {stream_id!r} must be ANY, NO_STREAM or an int, "
            f"not {expected!r}"
        )
    if expected < 0:
        raise InvalidEvent(
            f"expected_version for stream {stream_id!r} must not be negative: {expected}"
        )
    if expected > MAX_INT:
        raise InvalidEvent(
            f"expected_version for stream {stream_id!r} must be at most {MAX_INT}: {expected}"
        )
    return expected


def check_position(name: str, value: object, most: int = MAX_INT) -> int:
    """Return `value` if it is a version or position a store can hold (0 included), else raise."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= most:
        raise InvalidEvent(f"{name} must be an int from 0 to {most}, not {value!r}")
    return value


MAX_AFTER = MAX_INT - 1
"""Largest `after` of a read of the log: no event can follow position MAX_INT, and
PostgreSQL's high-water mark looks one position past `after`.

Example::

    from eventcraft.eventstore import MAX_AFTER, EventStore, NewEvent


    def feed(store: EventStore, after: str) -> list[int]:
        # ?after= of a feed's URL: a number past any position reads nothing, no error
        start = min(int(after), MAX_AFTER)
        return [e.position for e in store.read_all(after=start, limit=100)]


    with EventStore.open("sqlite:///shop.db") as store:
        store.append("order-1", [NewEvent("Placed", {}), NewEvent("Paid", {})])
        assert feed(store, "1") == [2]
        assert feed(store, "99999999999999999999") == []
"""


def check_limit(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_INT:
        raise InvalidEvent(f"limit must be None or an int from 0 to {MAX_INT}, not {value!r}")
    return value


def check_max_event_bytes(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidEvent(f"max_event_bytes must be a positive int, not {value!r}")
    return value


class PreparedBatch:
    """A batch of events checked as a whole, encoded in order as a backend asks for them.

    Everything but the encoding is checked at once: the container, the event
    types, the ids. The encoding, most of the cost, waits for `encoded`, so
    that a backend may encode the next part of a large batch while the
    database writes the last one. An event that cannot be encoded, or whose
    data and metadata take more than `max_event_bytes` of JSON, raises
    `InvalidEvent` from `encoded`; a backend asks before it commits anything,
    and rolls back what it began.
    """

    def __init__(
        self,
        stream_id: str,
        events: Sequence[NewEvent],
        max_event_bytes: int = MAX_EVENT_BYTES,
    ) -> None:
        check_stream_id(stream_id)
        if isinstance(events, NewEvent) or not isinstance(events, Sequence):
            raise InvalidEvent(
                f"events for stream {stream_id!r} must be a sequence of NewEvent, "
                f"not {type(events).__name__}"
            )
        if not events:
            raise InvalidEvent(f"an append to stream {stream_id!r} needs at least one event")
        if len(events) > MAX_BATCH:
            raise InvalidEvent(
                f"an append to stream {stream_id!r} holds {len(events)} events; "
                f"the limit is {MAX_BATCH}"
            )
        seen: set[int] = set()
        types: set[str] = set()  # names already checked: a batch repeats a few
        ids: list[uuid.UUID] = []
        timed = False
        tags: list[tuple[str, ...]] | None = None  # until an event has some
        for index, event in enumerate(events):
            if type(event) is not NewEvent and not isinstance(event, NewEvent):
                raise InvalidEvent(
                    f"event {index} for stream {stream_id!r} must be a NewEvent, "
                    f"not {type(event).__name__}"
                )
            if event.type not in types:
                check_new_name(f"the type of event {index} for stream {stream_id!r}", event.type)
                types.add(event.type)
            if type(event.id) is not uuid.UUID and not isinstance(event.id, uuid.UUID):
                raise InvalidEvent(
                    f"{_where(stream_id, index, event)}: id must be a uuid.UUID, not {event.id!r}"
                )
            if event.id.int in seen:
                raise InvalidEvent(
                    f"{_where(stream_id, index, event)}: id {event.id} appears twice in the batch"
                )
            seen.add(event.id.int)
            ids.append(event.id)
            if event.recorded_at is not None:
                _check_recorded_at(stream_id, index, event)
                timed = True
            if event.tags:
                if tags is None:
                    tags = [()] * index
                tags.append(check_tags(_where(stream_id, index, event), event.tags))
            elif tags is not None:
                tags.append(())
        self.stream_id = stream_id
        self.ids = ids
        """The events' ids, in order."""
        self.timed = timed
        """Some event has a `recorded_at` of its own (an import's): the backend keeps it."""
        self.tags = tags
        """Each event's tags, checked and sorted; None when no event has any."""
        self._events = events
        self._encoded: list[PreparedEvent] = []
        self._max_event_bytes = max_event_bytes

    def __len__(self) -> int:
        return len(self._events)

    @property
    def annotated(self) -> bool:
        """Some event has a `recorded_at` or tags of its own, which a backend that writes
        them only when given must be given."""
        return self.timed or self.tags is not None

    @property
    def events(self) -> Sequence[NewEvent]:
        """The events, not yet encoded: as given, or as `replace_events` left them."""
        return self._events

    def replace_events(self, events: Sequence[NewEvent]) -> None:
        """Put `events` in place of those given: the same ids in the same order, their
        payloads changed (personal fields sealed). Only before any is encoded."""
        if self._encoded or [event.id for event in events] != self.ids:
            raise RuntimeError("replace_events: the same events, before any is encoded")
        self._events = events

    def encoded(self, start: int, stop: int) -> list[PreparedEvent]:
        """Events `start` to `stop` (exclusive), encoded; raises `InvalidEvent` at a fault."""
        done = self._encoded
        stream_id = self.stream_id
        most = self._max_event_bytes
        tags = self.tags
        for index in range(len(done), min(stop, len(self._events))):
            event = self._events[index]
            try:
                data = _encode(event.data)
                metadata = b"{}" if event.metadata == {} else _encode(event.metadata)
            except InvalidEvent:
                # Encoded again for the message: the error names the field and the event.
                where = _where(stream_id, index, event)
                encode_object(f"{where}: data", event.data)
                encode_object(f"{where}: metadata", event.metadata)
                raise
            if len(data) + len(metadata) > most:
                raise InvalidEvent(
                    f"{_where(stream_id, index, event)} takes {len(data) + len(metadata)} bytes "
                    f"of JSON ({len(data)} of data, {len(metadata)} of metadata); the store's "
                    f"limit is {most} (max_event_bytes)"
                )
            recorded_at = event.recorded_at
            if recorded_at is not None:
                recorded_at = recorded_at.astimezone(UTC)
            done.append(
                _new_prepared(
                    PreparedEvent,
                    (
                        event.id,
                        event.type,
                        data,
                        metadata,
                        recorded_at,
                        tags[index] if tags else (),
                    ),
                )
            )
        return done[start:stop]

    def all(self) -> list[PreparedEvent]:
        """Every event, encoded; raises `InvalidEvent` on the first fault."""
        return self.encoded(0, len(self._events))


def check_events(
    stream_id: str, events: Sequence[NewEvent], max_event_bytes: int = MAX_EVENT_BYTES
) -> None:
    """Make the store's checks of an append of `events` to `stream_id`, encoding
    included, without a store; raises `InvalidEvent` on the first fault.

    Example::

        from eventcraft.eventstore import InvalidEvent, NewEvent, check_events


        def accepted(order_id: str, items: object) -> bool:
            # An HTTP intake's check of a request, before it is queued for the store.
            try:
                check_events(f"order-{order_id}", [NewEvent("ItemsAdded", {"items": items})])
            except InvalidEvent:
                return False
            return True


        assert accepted("42", ["A1", "B2"])
        assert not accepted("42", {"A1", "B2"})  # a set: JSON has none
        assert not accepted("42", [float("inf")])  # nor infinity
    """
    PreparedBatch(stream_id, events, max_event_bytes).all()


# tuple.__new__ straight from C: the named tuple's own __new__ is Python code.
_new_prepared = tuple.__new__


def _check_recorded_at(stream_id: str, index: int, event: NewEvent) -> None:
    given = event.recorded_at
    if not isinstance(given, datetime) or given.utcoffset() is None:
        raise InvalidEvent(
            f"{_where(stream_id, index, event)}: recorded_at must be None or a datetime with "
            f"a time zone, not {given!r}"
        )


def _where(stream_id: str, index: int, event: NewEvent) -> str:
    return f"event {index} ({event.type!r}) for stream {stream_id!r}"


def encode_object(where: str, value: dict[str, Any] | BaseModel) -> bytes:
    """Encode a dict or pydantic model as a JSON object; errors say `where` it was.

    Example::

        from eventcraft.eventstore import InvalidEvent, encode_object

        assert encode_object("cart-7's state", {"items": ["A1"]}) == b'{"items":["A1"]}'
        try:
            encode_object("cart-7's state", {"items": {"A1"}})
        except InvalidEvent as error:
            reason = str(error)
        assert reason.startswith("cart-7's state cannot be encoded as JSON")
    """
    try:
        return _encode(value)
    except InvalidEvent as error:
        raise InvalidEvent(f"{where} {error}") from error.__cause__


def model_data(model: BaseModel, where: str) -> dict[str, Any]:
    """`model` as the store keeps it (its JSON-mode dump), for a caller that changes it
    before it is encoded (the sealing of personal fields); `InvalidEvent` saying `where`
    for a value JSON cannot carry, as `encode_object` says it."""
    try:
        data = _dumped(model)
        _refuse_non_finite(model.model_dump())
    except InvalidEvent as error:
        raise InvalidEvent(f"{where} {error}") from error.__cause__
    return data


def _dumped(model: BaseModel) -> dict[str, Any]:
    """`model`'s JSON-mode dump; a value pydantic cannot dump is `InvalidEvent` naming
    where it is, which pydantic's own error does not."""
    try:
        return model.model_dump(mode="json")
    except (PydanticSerializationError, UnicodeError) as error:
        found = _first_unencodable(_python_dump(model), "")
        at = f"{type(found[1]).__name__} at {found[0]}" if found else "a value"
        raise InvalidEvent(f"holds {at}, which JSON cannot carry: {error}") from error


def _python_dump(model: BaseModel) -> object:
    try:
        return model.model_dump()
    except (PydanticSerializationError, ValueError, TypeError):
        return None  # no place to name: the message says "a value"


def _first_unencodable(value: object, path: str) -> tuple[str, object] | None:
    """The path to the first value in a model's Python dump that JSON cannot carry."""
    items = _named_children(value)
    if items is None:
        try:
            to_jsonable_python(value)
        except (PydanticSerializationError, UnicodeError):
            return path, value
        return None
    for key, item in items:
        found = _first_unencodable(item, f"{path}[{key!r}]")
        if found is not None:
            return found
    return None


def _encode(value: dict[str, Any] | BaseModel) -> bytes:
    # `type(...) is dict` first: isinstance against pydantic's metaclass is slow,
    # and this runs for every event appended.
    model = None
    if type(value) is not dict:
        if isinstance(value, BaseModel):
            model = value
            value = _dumped(value)
        elif not isinstance(value, dict):
            raise InvalidEvent(f"must be a dict or a pydantic model, not {type(value).__name__}")
    try:
        encoded = orjson.dumps(value)
    except (TypeError, orjson.JSONEncodeError) as error:
        raise InvalidEvent(f"cannot be encoded as JSON: {error}") from error
    # A backslash first: one memchr, where the six-byte search costs as much as
    # the encoding, and most payloads hold no escape at all. find() rather than
    # `in`, which first tries its operand as an int and costs half as much again.
    if encoded.find(b"\\") >= 0 and encoded.find(_JSON_NUL) >= 0:
        raise InvalidEvent("contains a NUL character, which the store cannot hold")
    # orjson writes NaN and the infinities as null and has no option to refuse
    # them; only a payload with a null in it can hold one, so only such a
    # payload is searched, in Python.
    if encoded.find(b"null") >= 0:
        # A model's dump has made null of a NaN in a field typed `object` or `Any`:
        # its Python dump still holds it.
        _refuse_non_finite(value if model is None else model.model_dump())
    return encoded


def _refuse_non_finite(value: object) -> None:
    if _any_non_finite(value):
        found = _first_non_finite(value, "")
        raise InvalidEvent(
            f"holds {found[1]!r} at {found[0]}: JSON has no NaN or infinity, "
            "and the store would keep null instead"
            if found
            else "holds NaN or infinity, which JSON has not"
        )


def _any_non_finite(value: object) -> bool:
    """Whether `value` holds a NaN or infinity where orjson encodes one.

    Exact types first: this runs for every payload that holds a null.
    """
    kind = type(value)
    if kind is dict:
        items: Any = value.values()  # type: ignore[attr-defined]
    elif kind is list or kind is tuple:
        items = value
    else:
        items = _children(value)
        if items is None:
            return isinstance(value, float) and not _isfinite(value)
    for item in items:
        kind = type(item)
        if kind is str or kind is int or item is None or kind is bool:
            continue
        if kind is float:
            if not _isfinite(item):
                return True
        elif _any_non_finite(item):
            return True
    return False


def _first_non_finite(value: object, path: str) -> tuple[str, float] | None:
    """The path to the first NaN or infinity in `value`, and that number; for the message."""
    if isinstance(value, float):
        return None if _isfinite(value) else (path, value)
    items = _named_children(value)
    if items is None:
        return None
    for key, item in items:
        found = _first_non_finite(item, f"{path}[{key!r}]")
        if found is not None:
            return found
    return None


def _named_children(value: object) -> Iterable[tuple[object, object]] | None:
    """`_children` with each one's key, index or field name, for a message's path."""
    if isinstance(value, dict):
        return value.items()
    if isinstance(value, list | tuple):
        return enumerate(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return ((f.name, getattr(value, f.name)) for f in dataclasses.fields(value))
    return None


def _children(value: object) -> Any:
    """The values orjson encodes inside a dict or list subclass or a dataclass, else None."""
    if isinstance(value, dict):
        return value.values()
    if isinstance(value, list | tuple):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [getattr(value, f.name) for f in dataclasses.fields(value)]
    return None


_isfinite = math.isfinite


decode = orjson.loads
