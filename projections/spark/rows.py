"""The log as Arrow batches in Spark: the schema as Spark declares it, and events that
decode their fields lazily for keying. The batches themselves are `log_batches.py`'s, which
the archive written without Spark shares.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import orjson
import pyarrow as pa
from eventcraft.eventstore import RecordedEvent

from ..log_batches import EVENT_SCHEMA, at, events_of, rows_of, to_batch

__all__ = ["EVENT_DDL", "EVENT_SCHEMA", "events_of", "probes_of", "to_batch"]

EVENT_DDL = (
    "position long, stream_id string, version long, type string, id string, "
    "data string, metadata string, recorded_at timestamp, tags array<string>"
)
"""`EVENT_SCHEMA` as Spark declares it."""


class _Probe(RecordedEvent):
    """A `RecordedEvent` that decodes a field only when it is read.

    Keying reads one or two fields of each event (often just `stream_id`);
    decoding all of them there would double the replay's Python work, since
    the fold decodes every event again after the shuffle.
    """

    __slots__ = ("_row",)
    _row: tuple[Any, ...]

    def __init__(self, row: tuple[Any, ...]) -> None:
        object.__setattr__(self, "_row", row)

    @property
    def position(self) -> int:
        return int(self._row[0])

    @property
    def stream_id(self) -> str:
        return str(self._row[1])

    @property
    def version(self) -> int:
        return int(self._row[2])

    @property
    def type(self) -> str:
        return str(self._row[3])

    @property
    def id(self) -> uuid.UUID:
        return uuid.UUID(self._row[4])

    @property
    def data(self) -> dict[str, Any]:
        return orjson.loads(self._row[5])  # type: ignore[no-any-return]

    @property
    def metadata(self) -> dict[str, Any]:
        return orjson.loads(self._row[6])  # type: ignore[no-any-return]

    @property
    def recorded_at(self) -> datetime:
        return at(self._row[7])

    @property
    def tags(self) -> tuple[str, ...]:
        return tuple(self._row[8] or ())


def probes_of(batch: pa.RecordBatch) -> Iterator[RecordedEvent]:
    """The batch's rows as events that decode their fields lazily (for keying)."""
    return map(_Probe, rows_of(batch))
