"""The Parquet archive on a local filesystem, written and read with pyarrow: no Spark.

The same layout as `spark/archive.py` writes and reads (the store's `archive_layout.py`):
segments `from-<first>-to-<last>/`, Parquet files of `log_batches.EVENT_SCHEMA`
(zstd), each committed by its `_SUCCESS` marker, chained from position 1.
Retention extends the archive this way before it removes events from the
store, and rebuilds read below the store's low-water mark from here, so
neither needs a JVM; Spark's `Archive` reads these segments as its own, and
these readers read its segments.

A segment is written in a hidden folder beside its place and renamed into
it, its marker written last: a crash leaves a hidden folder, never a
segment without all its rows. Events are archived as stored, personal
fields sealed: readers open them with the store's key store.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from eventcraft.eventstore import EncodedRecord, RecordedEvent, segment_name
from eventcraft.eventstore import archive_chain_break as chain_break
from eventcraft.eventstore import segment_span as span_of

from .errors import ProjectionError
from .log_batches import EVENT_SCHEMA, encoded_batch, events_of, to_batch

ROWS_PER_GROUP = 10_000
"""Rows in a Parquet row group: readers skip whole groups by their position statistics,
so a projection's batch reads little more than its own rows."""

_BATCH = 10_000


class ArchiveBroken(ProjectionError):
    """The archive's segments do not make one log from position 1 (overlap or gap)."""


@dataclass(frozen=True)
class ArchivedSegment:
    first: int
    last: int
    path: Path


class ArchiveFiles:
    """The archive in the folder `path` (a local path or `file:` URL).

    Example::

        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections import ArchiveFiles

        archive = ArchiveFiles("archive")  # a folder; pyarrow, no Spark
        with EventStore.open("sqlite:///shop.db") as store:
            store.append("order-1", [NewEvent("OrderPlaced", {}), NewEvent("OrderPaid", {})])
            store.append("order-2", [NewEvent("OrderPlaced", {})])
            assert archive.write_segment(1, 3, store.read_all()) == 3
        assert archive.last_position() == 3
        placed = archive.read(after=1, types=["OrderPlaced"])  # as stored: RecordedEvents
        assert [(event.position, event.stream_id) for event in placed] == [(3, "order-2")]
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        text = os.fspath(path)
        self.path = Path(text.removeprefix("file://").removeprefix("file:")).absolute()

    def __repr__(self) -> str:
        return f"ArchiveFiles({str(self.path)!r})"

    def segments(self) -> list[ArchivedSegment]:
        """The committed segments in position order, checked to chain from position 1."""
        found = []
        if self.path.is_dir():
            for entry in self.path.iterdir():
                span = span_of(entry.name)
                if span is not None and entry.is_dir() and (entry / "_SUCCESS").exists():
                    found.append(ArchivedSegment(*span, entry))
        found.sort(key=lambda segment: segment.first)
        broken = chain_break((segment.first, segment.last) for segment in found)
        if broken:
            raise ArchiveBroken(f"{self.path}: {broken}")
        return found

    def last_position(self) -> int:
        """The highest position the archive holds; 0 when it is empty."""
        segments = self.segments()
        return segments[-1].last if segments else 0

    def check_reaches(self, mark: int, run: int | None = None) -> None:
        """Raise `ArchiveBroken` unless the archive holds the log up to `mark`, which run
        `run` set: below it the store has holes, and a reader that found no folder (not
        mounted, another host, moved) would skip every archived event without a word."""
        by = f" by retention run {run}" if run is not None else ""
        if not self.path.is_dir():
            raise ArchiveBroken(
                f"the archive folder {self.path} is missing, but the events up to the "
                f"low-water mark {mark} are only there (written{by}): make it reachable here "
                "before reading below the mark"
            )
        last = self.last_position()
        if last < mark:
            raise ArchiveBroken(
                f"the archive at {self.path} ends at position {last}, below the low-water "
                f"mark {mark} (set{by}): the events from {last + 1} to {mark} are in no "
                "archive found here"
            )

    def write_segment(
        self, first: int, last: int, events: Iterable[RecordedEvent] | Iterable[EncodedRecord]
    ) -> int:
        """Commit `events` (positions `first` to `last`, in order; decoded, or as stored,
        which costs a fraction) as the next segment; how many were written. `first` must be
        where the archive ends, plus one."""
        expected = self.last_position() + 1
        if first != expected or last < first:
            raise ArchiveBroken(
                f"{self.path}: a segment from {first} to {last} does not continue the "
                f"archive, which continues at {expected}"
            )
        self.path.mkdir(parents=True, exist_ok=True)
        hidden = self.path / f".{segment_name(first, last)}.{uuid.uuid4().hex[:8]}"
        hidden.mkdir()
        written = 0
        try:
            with pq.ParquetWriter(
                hidden / "part-00000.parquet", EVENT_SCHEMA, compression="zstd"
            ) as writer:
                for chunk in _chunks(events):
                    if chunk[0].position < first or chunk[-1].position > last:
                        raise ArchiveBroken(
                            f"{self.path}: events beyond {first}..{last} given to its segment"
                        )
                    batch = (
                        encoded_batch(chunk)
                        if isinstance(chunk[0], EncodedRecord)
                        else to_batch(chunk)
                    )
                    writer.write_batch(batch, row_group_size=ROWS_PER_GROUP)
                    written += len(chunk)
            # Checked again at the last moment: another writer (a retention run, which
            # holds the archive's lock, `archive_lock.py`; or Spark, which does not) may
            # have committed a segment since; one renamed in now would overlap it.
            now = self.last_position() + 1
            if now != expected:
                raise ArchiveBroken(
                    f"{self.path}: another writer extended the archive to {now - 1} while "
                    f"this one wrote from {first}: its segment was not committed"
                )
            hidden.rename(self.path / segment_name(first, last))
            (self.path / segment_name(first, last) / "_SUCCESS").touch()
        except BaseException:
            shutil.rmtree(hidden, ignore_errors=True)
            raise
        return written

    def read(
        self,
        *,
        after: int = 0,
        upto: int | None = None,
        categories: Sequence[str] | None = None,
        types: Sequence[str] | None = None,
        window: int = ROWS_PER_GROUP,
    ) -> Iterator[RecordedEvent]:
        """The archived events with `after < position <= upto`, of those categories and
        types, in position order, as stored (personal fields sealed). Read `window`
        positions at a time: a reader that wants a few should ask for a small one."""
        for segment in self.segments():
            lo, hi = max(after, segment.first - 1), segment.last
            if upto is not None:
                hi = min(hi, upto)
            if lo < hi:
                yield from _read_segment(segment, lo, hi, categories, types, window)


def _read_segment(
    segment: ArchivedSegment,
    after: int,
    upto: int,
    categories: Sequence[str] | None,
    types: Sequence[str] | None,
    window: int,
) -> Iterator[RecordedEvent]:
    """A segment's events in (after, upto], a window of positions at a time, each sorted:
    Spark's tasks write their rows in the order the database gave them."""
    files = [str(file) for file in sorted(segment.path.glob("*.parquet"))]
    dataset = ds.dataset(files, schema=EVENT_SCHEMA, format="parquet")
    position = ds.field("position")
    for lo in range(after, upto, window):
        where = (position > lo) & (position <= min(lo + window, upto))
        if types is not None:
            where &= ds.field("type").isin(list(types))
        table = dataset.to_table(filter=where).sort_by("position")
        for batch in table.to_batches(max_chunksize=_BATCH):
            if categories is not None:
                batch = _of_categories(batch, categories)
            yield from events_of(batch)


def _chunks(
    events: Iterable[RecordedEvent] | Iterable[EncodedRecord],
) -> Iterator[list[RecordedEvent] | list[EncodedRecord]]:
    chunk: list[Any] = []
    for event in events:
        chunk.append(event)
        if len(chunk) == _BATCH:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _of_categories(batch: pa.RecordBatch, categories: Sequence[str]) -> pa.RecordBatch:
    """The rows whose stream's category (the part before the first `-`) is one of these."""
    import pyarrow.compute as pc

    streams = batch.column("stream_id")
    category = pc.list_element(pc.split_pattern(streams, "-", max_splits=1), 0)
    return batch.filter(pc.is_in(category, pa.array(list(categories), pa.string())))
