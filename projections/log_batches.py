"""The log as Arrow batches: one schema for the store's reads, the archive and the folds.

`data` and `metadata` travel as JSON text, exactly as the store keeps
them, so a fold on an executor, or a rebuild reading the archive, rebuilds
the same `RecordedEvent` the in-process runner hands it. Needs pyarrow
only: the archive is written and read without Spark too (`archive_files.py`).

`tags` came last, with events' tags: an archive written before has no such
column, and its events read as untagged (null and an empty list mean the same).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pyarrow as pa
from eventcraft.eventstore import EncodedRecord, RecordedEvent, events_from_columns

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
        pa.field("tags", pa.list_(pa.string()), nullable=True),
    ]
)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROS = pa.timestamp("us", tz="UTC")
_TAGS = pa.list_(pa.string())


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
        pa.array([e.tags for e in events], _TAGS),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=EVENT_SCHEMA)


def encoded_batch(records: Sequence[EncodedRecord]) -> pa.RecordBatch:
    """`to_batch` of events read as stored (`read_all_encoded`): their JSON and their
    times are text already, which Arrow takes as it is (the times parsed in C)."""
    columns = [
        pa.array([r.position for r in records], pa.int64()),
        pa.array([r.stream_id for r in records], pa.string()),
        pa.array([r.version for r in records], pa.int64()),
        pa.array([r.type for r in records], pa.string()),
        pa.array([r.id for r in records], pa.string()),
        pa.array([r.data for r in records], pa.string()),
        pa.array([r.metadata for r in records], pa.string()),
        pa.array([r.recorded_at for r in records], pa.string()).cast(_MICROS),
        pa.array([r.tags for r in records], _TAGS),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=EVENT_SCHEMA)


def events_of(batch: pa.RecordBatch) -> Iterator[RecordedEvent]:
    """The batch's rows as the events the store would return."""
    names = batch.schema.names

    def column(name: str) -> Sequence[Any]:
        found: list[Any]
        if name == "recorded_at":
            # Timestamps as integers: to_pylist() of a timestamp column builds a datetime
            # through the zone database per row, ten times slower.
            found = batch.column(name).cast(_MICROS).cast(pa.int64()).to_pylist()
        elif name == "tags" and name not in names:
            found = [None] * batch.num_rows
        else:
            found = batch.column(name).to_pylist()
        return found

    # Column by column, each walked in C, as the store builds a page.
    return iter(events_from_columns(column))


def rows_of(batch: pa.RecordBatch) -> Iterator[tuple[Any, ...]]:
    """The batch's rows as plain tuples, in `_ROW` order, then the time in microseconds and
    the tags (a list, or None for none)."""
    column = batch.column
    # Timestamps as integers: to_pylist() of a timestamp column builds a
    # datetime through the zone database per row, ten times slower.
    micros = column("recorded_at").cast(_MICROS).cast(pa.int64()).to_pylist()
    names = batch.schema.names
    tags = column("tags").to_pylist() if "tags" in names else [None] * batch.num_rows
    return zip(*(column(name).to_pylist() for name in _ROW), micros, tags, strict=True)


_ROW = ("position", "stream_id", "version", "type", "id", "data", "metadata")


def at(micros: int) -> datetime:
    return _EPOCH + timedelta(0, 0, micros)  # exact, unlike a float timestamp
