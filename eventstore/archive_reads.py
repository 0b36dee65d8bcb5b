"""The store's reads below the low-water mark: from the Parquet archive, as the table's.

A store opened with `archive=` reads its global log whole: `read_all(after=0)`
returns the events retention archived and removed, then the table's, one
sequence. The archive is the one retention writes (`projections/
archive_files.py`, Spark's layout): segments `from-<first>-to-<last>/` of
Parquet files, each committed by its `_SUCCESS` marker, chained from position
1, every event up to the mark as stored. Its folder is the one the last run
recorded (`RetentionRun.archive`), or the one named when opening (a relative
path the run recorded, a folder moved or mounted elsewhere).

The seam. The table read is taken in chunks; a chunk whose positions run on
from the last one handed over without a gap (`whole`) cannot miss an event,
so it is handed over at once, with no question asked. A chunk with a gap
(filtered reads always have gaps; SQLite has no others; PostgreSQL has those
of refused appends), and the end of the table, are checked against the
low-water mark, read after the chunk: a run whose removal the chunk's
statement saw had committed, so its mark is at most the one read. Above that
mark the chunk is whole; at or below it, it is replaced by the archive's
events (every one, kept ones too, so that none comes twice), then the table is
read again from the mark. A run committing while a reader is mid-way moves the
mark past where it stands: the reader's next chunk has a gap, and the events
the run removed come from the archive.

What is read here is as stored: personal fields sealed, opened by the store's
reads as the table's are. pyarrow (the `eventcraft[retention]` extra) is
imported only when a read reaches below the mark; without it that read raises
`ArchiveUnreadable` naming the extra, as it does when the folder is missing or
ends below the mark.
"""

from __future__ import annotations

import os
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .archive_layout import chain_break, span_of
from .columns import events_from_columns
from .errors import ArchiveUnreadable, InvalidEvent
from .events import EncodedEvent, EncodedRecord, RecordedEvent, recorded_at_text
from .json_lines import JsonLines, chunks_of
from .retention import RETENTION_EXTRA, Retention
from .type_counts import version_text

if TYPE_CHECKING:
    import pyarrow as pa

ArchiveOption = bool | str | os.PathLike[str]
"""`archive=` of `EventStore.open`: False (the table alone), True (the folder the last
retention run recorded), or the folder itself."""

CHUNK = 1_000
"""Events of the table checked together at the seam: one look at positions a chunk."""

WINDOW = 10_000
"""Positions of the archive read at a time: Parquet skips row groups outside them."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_COLUMNS = ("position", "stream_id", "version", "type", "id", "data", "metadata", "recorded_at")

C = TypeVar("C")


def archive_option(archive: object) -> ArchiveOption:
    """`archive` if `EventStore.open` takes it; `InvalidEvent` naming it if not."""
    if isinstance(archive, bool):
        return archive
    if isinstance(archive, str | os.PathLike) and os.fspath(archive):
        return archive
    raise InvalidEvent(
        f"archive is True (the folder the last retention run recorded), a folder, or False, "
        f"not {archive!r}"
    )


@dataclass(frozen=True)
class Segment:
    first: int
    last: int
    path: Path


class StoreArchive:
    """Where a store's archive is: the folder named when opening, else the last run's."""

    def __init__(self, option: ArchiveOption, retention: Callable[[], Retention]) -> None:
        self._named = None if isinstance(option, bool) else _folder(option)
        self._retention = retention

    def segments(self, mark: int) -> list[Segment]:
        """The committed segments, checked to hold the log from position 1 to `mark`."""
        runs = self._retention().runs()
        run = runs[-1] if runs else None
        folder = self._named or (_folder(run.archive) if run is not None else None)
        by = f" (written by retention run {run.run})" if run is not None else ""
        if folder is None or not folder.is_dir():
            raise ArchiveUnreadable(
                f"the archive folder {folder} is missing, but the events at or below the "
                f"low-water mark {mark} are only there{by}: make it reachable here, or open "
                "the store with archive= naming the folder"
            )
        found = []
        for entry in folder.iterdir():
            span = span_of(entry.name)
            if span is not None and entry.is_dir() and (entry / "_SUCCESS").exists():
                found.append(Segment(*span, entry))
        found.sort(key=lambda segment: segment.first)
        broken = chain_break((segment.first, segment.last) for segment in found)
        if broken is not None:
            raise ArchiveUnreadable(f"{folder}: the {broken}")
        end = found[-1].last if found else 0
        if end < mark:
            raise ArchiveUnreadable(
                f"the archive at {folder} ends at position {end}, below the "
                f"low-water mark {mark}{by}: the events from {end + 1} to {mark} are in no "
                "archive found here"
            )
        return found


def _folder(path: str | os.PathLike[str]) -> Path:
    text = os.fspath(path)
    return Path(text.removeprefix("file://").removeprefix("file:")).absolute()


def _pyarrow(mark: int) -> Any:
    try:
        import pyarrow.compute as pc
        import pyarrow.dataset as ds
    except ImportError:
        raise ArchiveUnreadable(
            f"reading the events at or below the low-water mark {mark} from the archive "
            f"needs pyarrow: install {RETENTION_EXTRA}"
        ) from None
    return ds, pc


def _tables(
    archive: StoreArchive,
    mark: int,
    after: int,
    upto: int,
    *,
    categories: Sequence[str] | None = None,
    types: Sequence[str] | None = None,
    stream_id: str | None = None,
) -> Iterator[pa.Table]:
    """The archived rows with `after < position <= upto` (at most `mark`), of those
    categories, types or stream, a window of positions at a time, each sorted."""
    ds, pc = _pyarrow(mark)
    import pyarrow as pa

    schema = pa.schema(
        [
            pa.field("position", pa.int64()),
            pa.field("stream_id", pa.string()),
            pa.field("version", pa.int64()),
            pa.field("type", pa.string()),
            pa.field("id", pa.string()),
            pa.field("data", pa.string()),
            pa.field("metadata", pa.string()),
            pa.field("recorded_at", pa.timestamp("us", tz="UTC")),
            pa.field("tags", pa.list_(pa.string())),
        ]
    )
    upto = min(upto, mark)
    for segment in archive.segments(mark):
        lo, hi = max(after, segment.first - 1), min(upto, segment.last)
        if lo >= hi:
            continue
        files = [str(file) for file in sorted(segment.path.glob("*.parquet"))]
        dataset = ds.dataset(files, schema=schema, format="parquet")
        position = ds.field("position")
        # A stream's few rows are found in one scan; the log is read a window at a time,
        # which bounds what is held at once.
        window = hi - lo if stream_id is not None else WINDOW
        for start in range(lo, hi, window):
            where = (position > start) & (position <= min(start + window, hi))
            if types is not None:
                where &= ds.field("type").isin(list(types))
            if stream_id is not None:
                where &= ds.field("stream_id") == stream_id
            table = dataset.to_table(filter=where)
            if categories is not None:
                streams = table.column("stream_id")
                category = pc.list_element(pc.split_pattern(streams, "-", max_splits=1), 0)
                table = table.filter(pc.is_in(category, pa.array(list(categories), pa.string())))
            if table.num_rows:
                yield table.sort_by("position")


def _columns(table: pa.Table) -> Callable[[str], list[Any]]:
    import pyarrow as pa

    def column(name: str) -> list[Any]:
        if name == "recorded_at":
            # As integers: to_pylist() of a timestamp builds each datetime through the
            # zone database, ten times slower.
            micros: list[Any] = table.column(name).cast(pa.int64()).to_pylist()
            return micros
        found: list[Any] = table.column(name).to_pylist()
        return found

    return column


def _recorded(table: pa.Table) -> list[RecordedEvent]:
    return events_from_columns(_columns(table))


def _records(table: pa.Table) -> list[EncodedRecord]:
    column = _columns(table)
    positions, streams, versions, types, ids, data, metadata, micros = map(column, _COLUMNS)
    times = {m: recorded_at_text(_EPOCH + timedelta(microseconds=m)) for m in set(micros)}
    tags = [tuple(t) if t else () for t in column("tags")]
    return list(
        map(
            EncodedRecord,
            positions,
            ids,
            streams,
            versions,
            types,
            data,
            metadata,
            map(times.__getitem__, micros),
            tags,
        )
    )


def _encoded(table: pa.Table) -> list[EncodedEvent]:
    column = _columns(table)
    return [
        EncodedEvent(version, type, data, version_text(metadata))
        for version, type, data, metadata in zip(
            column("version"), column("type"), column("data"), column("metadata"), strict=True
        )
    ]


class Chunks(Generic[C]):
    """How the seam handles one kind of chunk of the log: a list of events or records, or
    JSON lines; and how the archive gives that kind."""

    def count(self, chunk: C) -> int:
        raise NotImplementedError

    def last(self, chunk: C) -> int:
        """The position of the chunk's last event (it has one)."""
        raise NotImplementedError

    def above(self, chunk: C, mark: int) -> C | None:
        """The chunk's events above `mark`, None if none is."""
        raise NotImplementedError

    def first(self, chunk: C, count: int) -> C:
        """The chunk's first `count` events."""
        raise NotImplementedError

    def whole(self, chunk: C, after: int) -> bool:
        """The chunk's positions run on from `after` without a gap: it misses no event."""
        count = self.count(chunk)
        return count > 0 and self.last(chunk) - after == count

    def archived(
        self,
        archive: StoreArchive,
        mark: int,
        after: int,
        upto: int,
        limit: int | None,
        categories: Sequence[str] | None,
        types: Sequence[str] | None,
    ) -> Iterator[C]:
        """The archive's events with `after < position <= upto` (at most `mark`), in chunks,
        `limit` at most."""
        raise NotImplementedError


class _Listed(Chunks[list[Any]]):
    def __init__(self, make: Callable[[pa.Table], list[Any]]) -> None:
        self._make = make

    def count(self, chunk: list[Any]) -> int:
        return len(chunk)

    def last(self, chunk: list[Any]) -> int:
        position: int = chunk[-1].position
        return position

    def first(self, chunk: list[Any], count: int) -> list[Any]:
        return chunk[:count]

    def above(self, chunk: list[Any], mark: int) -> list[Any] | None:
        kept = chunk[bisect_right(chunk, mark, key=lambda event: event.position) :]
        return kept or None

    def archived(
        self,
        archive: StoreArchive,
        mark: int,
        after: int,
        upto: int,
        limit: int | None,
        categories: Sequence[str] | None,
        types: Sequence[str] | None,
    ) -> Iterator[list[Any]]:
        left = limit
        for table in _tables(archive, mark, after, upto, categories=categories, types=types):
            if left is not None:
                table = table.slice(0, left)
                left -= table.num_rows
            yield self._make(table)
            if left == 0:
                return


class _Lines(Chunks[JsonLines]):
    def count(self, chunk: JsonLines) -> int:
        return chunk.events

    def last(self, chunk: JsonLines) -> int:
        return chunk.last_position

    def first(self, chunk: JsonLines, count: int) -> JsonLines:
        lines = _lines(chunk)[:count]
        return JsonLines("".join(lines), len(lines), _position(lines[-1]))

    def above(self, chunk: JsonLines, mark: int) -> JsonLines | None:
        if chunk.last_position <= mark:
            return None
        kept = [line for line in _lines(chunk) if _position(line) > mark]
        return JsonLines("".join(kept), len(kept), chunk.last_position)

    def archived(
        self,
        archive: StoreArchive,
        mark: int,
        after: int,
        upto: int,
        limit: int | None,
        categories: Sequence[str] | None,
        types: Sequence[str] | None,
    ) -> Iterator[JsonLines]:
        for table in _tables(archive, mark, after, upto, categories=categories):
            yield from chunks_of(_records(table))


def _lines(chunk: JsonLines) -> list[str]:
    """The chunk's lines, each with its newline: a line ends there and only there."""
    return [line + "\n" for line in chunk.text.split("\n")[:-1]]


def _position(line: str) -> int:
    """The position of an event's JSON line (`json_lines.line`: `position` follows
    `metadata`, whose text may hold the same key, escaped inside a string or nested)."""
    start = line.rindex(',"position":') + len(',"position":')
    return int(line[start : line.index(",", start)])


RECORDED: Chunks[list[RecordedEvent]] = _Listed(_recorded)
"""`read_all`'s chunks."""

RECORDS: Chunks[list[EncodedRecord]] = _Listed(_records)
"""`read_all_encoded`'s chunks."""

LINES: Chunks[JsonLines] = _Lines()
"""`read_all_json`'s chunks."""


def stream_archived(
    archive: StoreArchive,
    mark: int,
    stream_id: str,
    versions: range,
    after: int,
    upto: int,
    *,
    encoded: bool,
) -> list[RecordedEvent] | list[EncodedEvent]:
    """The stream's archived events of `versions` (in version order), looked for at
    positions `after < position <= upto`: where a stream read found them missing."""
    import pyarrow as pa

    tables = list(_tables(archive, mark, after, upto, stream_id=stream_id))
    if not tables:
        return []
    table = pa.concat_tables(tables)
    version = table.column("version")
    import pyarrow.compute as pc

    inside = pc.and_(pc.greater_equal(version, versions.start), pc.less(version, versions.stop))
    table = table.filter(inside).sort_by("version")
    return _encoded(table) if encoded else _recorded(table)
