"""The SQLite store's rows: events into rows for an append, pages of rows into events.

Ids are stored as their 16 bytes. A store made by an earlier release holds
its older rows' ids as 32 hexadecimal characters, and keeps them (stored
events never change), so whatever reads or looks up ids takes both forms.

A page of rows becomes events in one pass per column (`map` over the
columns, in C) rather than a Python call per row: on a read, what is left
per event is building the event itself.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from itertools import repeat
from typing import Any

import orjson

from ..encoding import PreparedEvent
from ..events import (
    EncodedRecord,
    RecordedEvent,
    made_once_each,
    recorded_at_text,
    recorded_events,
)
from ..ids import uuid_from_int, uuids_from_ints
from ..paging import Row

_from_bytes = int.from_bytes
_uuid = uuid_from_int
_loads = orjson.loads
_dumps = orjson.dumps
_moment = datetime.fromisoformat


def event_id(stored: bytes | str) -> uuid.UUID:
    """The id of a stored row: 16 bytes, or 32 hexadecimal digits in an older row."""
    return _uuid(_from_bytes(stored) if type(stored) is bytes else int(stored, 16))


def id_forms(ids: Iterable[uuid.UUID], text_too: bool) -> list[bytes | str]:
    """What to look `ids` up by: their bytes and, in a store with older text ids, their text."""
    forms: list[bytes | str] = [id.bytes for id in ids]
    if text_too:
        forms += [id.hex for id in ids]
    return forms


def event_rows(
    stream_id: str,
    category: str,
    events: Sequence[PreparedEvent],
    actual: int,
    first: int,
    timed: bool,
) -> list[tuple[Any, ...]]:
    """The rows of an append; with `timed`, events with a `recorded_at` of their own keep it."""
    now = datetime.now(UTC).isoformat()
    return [
        (
            first + offset,
            stream_id,
            actual + offset + 1,
            event.id.bytes,
            event.type,
            event.data.decode(),
            event.metadata.decode(),
            event.recorded_at.isoformat() if timed and event.recorded_at else now,
            category,
            _dumps(event.tags).decode() if event.tags else None,
        )
        for offset, event in enumerate(events)
    ]


def tag_rows(events: Sequence[PreparedEvent], first: int) -> list[tuple[str, int, str]]:
    """The rows of `eventcraft_tags` for an append whose first position is `first`."""
    return [
        (tag, first + offset, event.type)
        for offset, event in enumerate(events)
        for tag in event.tags
    ]


def _tags(stored: str | None) -> tuple[str, ...]:
    return () if stored is None else tuple(_loads(stored))


def recorded_page(rows: Sequence[Row]) -> list[RecordedEvent]:
    """Events of rows of (id, stream_id, version, position, type, data, metadata,
    recorded_at, tags)."""
    if not rows:
        return []
    ids, streams, versions, positions, types, data, metadata, moments, tags = zip(
        *rows, strict=True
    )
    return recorded_events(
        _ids(ids),
        streams,
        versions,
        positions,
        types,
        map(_loads, data),
        map(_loads, metadata),
        made_once_each(_moment, moments),
        repeat((), len(tags)) if tags.count(None) == len(tags) else map(_tags, tags),
    )


def _ids(stored: tuple[bytes | str, ...]) -> list[uuid.UUID]:
    try:
        values = list(map(_from_bytes, stored))  # type: ignore[arg-type]
    except TypeError:  # a page reaching rows of an earlier release, with text ids
        return list(map(event_id, stored))
    return uuids_from_ints(values, len(values))


def encoded_page(rows: Sequence[Row]) -> list[EncodedRecord]:
    """`EncodedRecord`s of the same rows: the id and the time as text, the JSON as stored,
    the tags decoded (those of an untagged event are NULL: nothing to decode).

    Made a column at a time, as `recorded_page` is: the ids' text straight from their
    bytes (no UUID built), each distinct time once (the events of an append share it).
    """
    if not rows:
        return []
    ids, streams, versions, positions, types, data, metadata, moments, tags = zip(
        *rows, strict=True
    )
    return list(
        map(
            _record,
            positions,
            map(_id_text, ids),
            streams,
            versions,
            types,
            data,
            metadata,
            made_once_each(_moment_text, moments),
            repeat((), len(tags)) if tags.count(None) == len(tags) else map(_tags, tags),
        )
    )


def _record(*fields: Any) -> EncodedRecord:
    return tuple.__new__(EncodedRecord, fields)


def _id_text(stored: bytes | str) -> str:
    """The id as `str(uuid)` gives it: 16 bytes, or an older row's 32 hexadecimal digits."""
    digits = stored.hex() if type(stored) is bytes else str(stored).lower()
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


def _moment_text(stored: Any) -> str:
    return recorded_at_text(_moment(stored))
