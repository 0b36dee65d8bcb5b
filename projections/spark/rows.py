"""The log as Arrow batches: one schema for the store's reads, the archive and the folds.

`data` and `metadata` travel as JSON text, exactly as the store keeps
them, so a fold on an executor rebuilds the same `RecordedEvent` the
in-process runner hands it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pyarrow as pa
from eventcraft.eventstore import RecordedEvent

EVENT_SCHEMA = pa.schema(
    [
        pa.field("position", pa.int64(), nullable=False),
        pa.field("stream_id", pa.string(), nullable=False),
        pa.field("version", pa.int64(), nullable=False),
        pa.field("type", pa.string(), nullable=False),
        pa.field("id", pa.string(), nullable=False),
        pa.field("data", pa.string(), nullable=False),
        pa.field("metadata", pa.string(), nullable=False),
        pa.field("recorded_at", pa.timestamp("us", tz="UTC"), nullable=False),
    ]
)
EVENT_DDL = (
    "position long, stream_id string, version long, type string, id string, "
    "data string, metadata string, recorded_at timestamp"
)
"""`EVENT_SCHEMA` as Spark declares it."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROS = pa.timestamp("us", tz="UTC")


def to_batch(events: Sequence[RecordedEvent]) -> pa.RecordBatch:
    dumps = orjson.dumps
    columns = [
        pa.array([e.position for e in events], pa.int64()),
        pa.array([e.stream_id for e in events], pa.string()),
        pa.array([e.version for e in events], pa.int64()),
        pa.array([e.type for e in events], pa.string()),
        pa.array([str(e.id) for e in events], pa.string()),
        pa.array([dumps(e.data) for e in events], pa.binary()).cast(pa.string()),
        pa.array([dumps(e.metadata) for e in events], pa.binary()).cast(pa.string()),
        pa.array([e.recorded_at for e in events], pa.timestamp("us", tz="UTC")),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=EVENT_SCHEMA)


def events_of(batch: pa.RecordBatch) -> Iterator[RecordedEvent]:
    """The batch's rows as the events the store would return."""
    loads = orjson.loads
    for position, stream_id, version, type_, id_, data, metadata, at in _rows(batch):
        yield RecordedEvent(
            id=uuid.UUID(id_),
            stream_id=stream_id,
            version=version,
            position=position,
            type=type_,
            data=loads(data),
            metadata=loads(metadata),
            recorded_at=_at(at),
        )


def _rows(batch: pa.RecordBatch) -> Iterator[tuple[Any, ...]]:
    """The batch's rows as plain tuples, in `_ROW` order, timestamps as microseconds."""
    column = batch.column
    # Timestamps as integers: to_pylist() of a timestamp column builds a
    # datetime through the zone database per row, ten times slower.
    micros = column("recorded_at").cast(_MICROS).cast(pa.int64()).to_pylist()
    return zip(*(column(name).to_pylist() for name in _ROW), micros, strict=True)


_ROW = ("position", "stream_id", "version", "type", "id", "data", "metadata")


def _at(micros: int) -> datetime:
    return _EPOCH + timedelta(microseconds=micros)  # exact, unlike a float timestamp


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
        return _at(self._row[7])


def probes_of(batch: pa.RecordBatch) -> Iterator[RecordedEvent]:
    """The batch's rows as events that decode their fields lazily (for keying)."""
    return map(_Probe, _rows(batch))
