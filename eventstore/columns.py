"""Events made from their fields held column by column, as the store makes a page it
reads: for a reader that holds the log in columns of its own (Arrow batches of the
archive or of a Spark replay), so that it builds the same `RecordedEvent`s the store
returns, at the store's speed.

Each column is walked in C, with no Python call per event but the parsing of `data`
and `metadata`, and the cycle collector is paused while the columns are taken and the
events made (`collector.py` says why): the caller hands over a function that gives
each column, which is called inside the pause.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from itertools import repeat
from typing import Any

import orjson

from .collector import collector_paused
from .events import RecordedEvent, made_once_each, recorded_events
from .ids import uuids_from_ints

COLUMNS = ("id", "stream_id", "version", "position", "type", "data", "metadata")
"""The columns taken as they are, in the order `recorded_events` takes them; `recorded_at`
and `tags` follow."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def events_from_columns(column: Callable[[str], Sequence[Any]]) -> list[RecordedEvent]:
    """The events whose fields `column(name)` gives, one list a field, one row an event.

    Each name is asked for once, while the cycle collector is paused: `id` (as the log
    writes it, 36 characters: `ValueError` for another), `stream_id`, `version`,
    `position`, `type`, `data` and `metadata` (JSON text, as stored), `recorded_at` (in
    microseconds since the epoch, UTC: exact, unlike a float timestamp) and `tags` (a
    row's tags, or None for none). The fields are taken as they are, unchecked: they are
    what a store wrote.

    Example::

        from eventcraft.eventstore import events_from_columns

        columns = {  # the log held column by column: an Arrow batch of the archive, say
            "id": ["01a2278b-eadc-7371-9175-26c7095cbccd", "01a2278b-eae3-728d-811f-4e02cb240c77"],
            "stream_id": ["order-1", "order-1"],
            "version": [1, 2],
            "position": [1, 2],
            "type": ["OrderPlaced", "OrderPaid"],
            "data": ['{"cents": 1250}', "{}"],
            "metadata": ["{}", "{}"],
            "recorded_at": [1_700_000_000_000_000, 1_700_000_060_000_000],
            "tags": [None, ["customer:c1"]],
        }
        placed, paid = events_from_columns(columns.__getitem__)
        assert (placed.type, placed.data, placed.tags) == ("OrderPlaced", {"cents": 1250}, ())
        assert paid.tags == ("customer:c1",)
        assert (paid.recorded_at - placed.recorded_at).total_seconds() == 60
    """
    with collector_paused():
        ids, stream_ids, versions, positions, types, data, metadata = map(column, COLUMNS)
        micros = column("recorded_at")
        tags = column("tags")
        return recorded_events(
            _event_ids(ids),
            stream_ids,
            versions,
            positions,
            types,
            map(orjson.loads, data),
            map(orjson.loads, metadata),
            made_once_each(_at, micros),
            map(_tags, tags),
        )


def _event_ids(texts: Sequence[str]) -> list[uuid.UUID]:
    """`uuid.UUID(text)` of ids as the log writes them (36 characters), for a third of
    the cost: each step a column at a time, in C."""
    if any(map((36).__ne__, map(len, texts))):
        bad = next(text for text in texts if len(text) != 36)
        raise ValueError(f"badly formed event id {bad!r}")
    digits = map(str.replace, texts, repeat("-"), repeat(""))
    return uuids_from_ints(map(int, digits, repeat(16)), len(texts))


def _at(micros: int) -> datetime:
    return _EPOCH + timedelta(0, 0, micros)


def _tags(tags: Sequence[str] | None) -> tuple[str, ...]:
    return tuple(tags) if tags else ()
