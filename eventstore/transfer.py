"""Export and import: a store's events as NDJSON, one event a line, and back.

Together they copy a store between backends and make a logical backup. An
import keeps every event's id, stream, version, data, metadata, time and
tags (a file exported before events had tags imports as events without);
positions are the target's own, given in the order of the file, so the
copy's global log keeps the original order. An export of a store retention
has removed events from starts those streams part-way, and cannot be imported
as a copy (a stream cannot begin above version 1), unless the store was opened
with `archive=`: then its reads, and so its export, hold the events the
archive keeps below the low-water mark, and the export is the whole log.

The lines are the store's `read_all_json`: every field, keys sorted, `data`
and `metadata` as stored (`json_lines.py`), and after the event at the
version a stream was deleted at, a line of its deletion (soft or tombstone),
which the import applies there, at the original's time; that of a stream
deleted before its first event comes first. So a copy hides what the
original hides and refuses what it refuses. The file an import reads, and
its check, are `import_file.py`'s.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import IO

from .backends import scheme_of
from .encoding import MAX_EVENT_BYTES
from .errors import (
    BadImportLine,
    DuplicateEventId,
    ImportStopped,
    InvalidEvent,
    StreamTombstoned,
    WrongExpectedVersion,
)
from .events import NewEvent
from .import_file import (
    Batch,
    Deleted,
    Progress,
    Step,
    batches,
    checked,
    lines_of,
    new_events,
)
from .json_lines import JsonLines, with_placed
from .parallel_export import export_ranges
from .read_ahead import read_ahead
from .store import EventStore


def _nothing(done: int) -> None:
    """A `Progress` that shows nothing."""


@dataclass(frozen=True)
class ExportReport:
    """What `export_log` wrote.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent, export_log

        with EventStore.open("sqlite:///shop.db") as store:
            store.append("order-1", [NewEvent("OrderPlaced", {"cents": 1250})])
            with open("backup-1.ndjson", "wb") as out:
                first = export_log(store, out)
            store.append("order-1", [NewEvent("OrderPaid", {})])
            with open("backup-2.ndjson", "wb") as out:  # only what came since
                second = export_log(store, out, after=first.last_position)
        assert (first.events, first.last_position) == (1, 1)
        assert (second.events, second.last_position) == (1, 2)
    """

    events: int
    """Events written."""
    last_position: int | None
    """The position of the last event written; an export after it continues this one.
    None when it wrote no event: the next export starts after the same position."""
    deletions: int = 0
    """Deletions written, each after its stream's event at the version deleted."""


@dataclass(frozen=True)
class ImportReport:
    """What `import_log` read and wrote.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent, export_log, import_log

        with EventStore.open("sqlite:///shop.db") as shop, open("shop.ndjson", "wb") as out:
            shop.append("order-1", [NewEvent("OrderPlaced", {}), NewEvent("OrderPaid", {})])
            export_log(shop, out)
        with EventStore.open("sqlite:///copy.db") as copy:
            with open("shop.ndjson", "rb") as source:
                first = import_log(copy, source)
            with open("shop.ndjson", "rb") as source:  # again: after an interruption, say
                again = import_log(copy, source)
        assert (first.events, first.written, first.skipped) == (2, 2, 0)
        assert (again.events, again.written, again.skipped) == (2, 0, 2)
    """

    events: int
    """Events read from the file."""
    written: int
    """Events appended to the store."""
    skipped: int
    """Events the store already held (same id, stream and version): written before."""
    deletions: int = 0
    """Deletions applied to the store; one it held already (written before) is not counted."""


def export_lines(
    store: EventStore, *, after: int = 0, until: int | None = None, categories: Sequence[str] = ()
) -> Iterator[tuple[str, JsonLines, int]]:
    """The lines an export writes of the log after `after` to `until` (None: the
    high-water mark now), chunk by chunk: each chunk's text with its deletions' lines, the
    chunk, and how many deletions it added (`with_placed`).

    For an export written elsewhere than to a file of bytes.

    Example::

        import gzip
        import json

        from eventcraft.eventstore import EventStore, NewEvent, export_lines

        with EventStore.open("sqlite:///shop.db") as store:
            store.append("order-1", [NewEvent("OrderPlaced", {}), NewEvent("OrderPaid", {})])
            with gzip.open("shop.ndjson.gz", "wt", encoding="utf-8") as out:
                for text, chunk, deletions in export_lines(store):
                    out.write(text)
        with gzip.open("shop.ndjson.gz", "rt", encoding="utf-8") as lines:
            assert [json.loads(line)["type"] for line in lines] == ["OrderPlaced", "OrderPaid"]
    """
    end = store.high_water_mark() if until is None else until
    chunks = store.read_all_json(after, end, categories=categories or None)
    placed = store.placed_deletions(after, end, categories=categories or None)
    return with_placed(chunks, placed)


def export_log(
    store: EventStore,
    out: IO[bytes],
    *,
    after: int = 0,
    until: int | None = None,
    categories: Sequence[str] = (),
    progress: Progress = _nothing,
    jobs: int = 1,
) -> ExportReport:
    """Write the log after `after` and up to `until` (of `categories`, if given) to `out`.

    `progress` is told how many positions past `after` are done, now and then.
    With `jobs` above 1, that many worker processes, each with a store of its
    own opened from `store.url` (and `store.archive`), make the lines, and the file
    is the same (`InvalidEvent` for a memory store, which no other process reaches).

    A store opened with `archive=` exports the whole log: below the low-water mark,
    the events the archive holds (retention's), so the export imports as a copy.

    The line of each stream's deletion follows the stream's event at the version deleted,
    if the export holds it (`placed_deletions`: one query, however many streams); those
    of streams deleted before their first event come first, in an export from the start.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent, export_log

        with EventStore.open("sqlite:///shop.db") as store:
            store.append("order-1", [NewEvent("OrderPlaced", {"cents": 1250})])
            store.append("cart-7", [NewEvent("ItemAdded", {"sku": "tea"})])
            store.delete_stream("cart-7")
            with open("shop.ndjson", "wb") as out:
                report = export_log(store, out)
        assert (report.events, report.deletions, report.last_position) == (2, 1, 2)
        with open("shop.ndjson", encoding="utf-8") as lines:
            assert len(lines.readlines()) == 3  # an event a line, then the deletion's
    """
    if until is not None and until < after:
        raise InvalidEvent(f"an export until {until} is before its start, after {after}")
    if jobs < 1:
        raise InvalidEvent(f"an export's jobs are 1 or more, not {jobs}")
    # Fixed now: the ranges shared out end here, and every deletion listed for the span
    # falls in a chunk read.
    end = store.high_water_mark()
    if until is not None:
        end = min(until, end)
    if jobs > 1 and scheme_of(store.url) == "memory":
        raise InvalidEvent("an export in jobs needs a store other processes can open, not memory")
    # An empty span has no range to share out, and may still hold deletions made before
    # any event: the single process writes those.
    if jobs > 1 and end > after:
        count, deletions, last = export_ranges(
            store.url,
            out,
            after=after,
            until=end,
            categories=categories,
            jobs=jobs,
            progress=progress,
            archive=store.archive,
        )
        out.flush()
        return ExportReport(events=count, last_position=last, deletions=deletions)
    count = deletions = 0
    last = None
    for text, chunk, added in export_lines(store, after=after, until=end, categories=categories):
        out.write(text.encode())
        count += chunk.events
        deletions += added
        last = chunk.last_position or last  # 0: deletions before every event, no event
        progress((last or after) - after)
    out.flush()
    progress((last or after) - after)
    return ExportReport(events=count, last_position=last, deletions=deletions)


@contextmanager
def checked_import(
    source: IO[bytes],
    *,
    checking: Progress = _nothing,
    max_event_bytes: int = MAX_EVENT_BYTES,
) -> Iterator[IO[bytes]]:
    """`source`, checked whole (`import_file.checked`), to be given to
    `import_log(..., check=False)`: checked before the store is opened, a refused file
    leaves no new store behind. `BadImportLine` names the first line at fault.

    A source that cannot be read twice (a pipe) is copied to a temporary file as it is
    checked, and the copy is what is handed back (and removed afterwards). `checking` is
    told the bytes checked so far, now and then. The default `max_event_bytes` is that of
    a store opened without one.

    Example::

        from pathlib import Path

        from eventcraft.eventstore import BadImportLine, EventStore, checked_import, import_log


        def copy(export: str, url: str) -> None:
            # The file is checked whole before the store is opened: a bad one makes none.
            with (
                open(export, "rb") as source,
                checked_import(source) as lines,
                EventStore.open(url) as store,
            ):
                import_log(store, lines, check=False)


        Path("broken.ndjson").write_text('{"stream_id": "order-1", "type": "Placed"}')
        try:
            copy("broken.ndjson", "sqlite:///copy.db")
        except BadImportLine as error:
            reason = str(error)
        assert reason.startswith("line 1: missing") and not Path("copy.db").exists()
    """
    with checked(source, max_event_bytes=max_event_bytes, progress=checking) as lines:
        yield lines


def import_log(
    store: EventStore,
    source: IO[bytes],
    *,
    progress: Progress = _nothing,
    checking: Progress = _nothing,
    check: bool = True,
) -> ImportReport:
    """Append the events of an export read from `source`, keeping ids, versions and times.

    The whole of `source` is checked first (`checked_import`): a malformed
    line, a stream whose versions do not go on one at a time, an event the store
    would refuse is a `BadImportLine` naming its line, and nothing is written. A
    source that cannot be read twice (a pipe) is copied to a temporary file as it
    is checked.

    Then consecutive events of one stream go in one append, at the version the
    file gives them, so streams keep their versions and the log its order; a
    deletion line deletes its stream where it stands, after the stream's event at
    the version deleted and before those written after.
    Idempotent by event id: events the store already holds where the file puts
    them are skipped (those of a stream the store tombstoned too), deletions it holds
    already are passed over, so a second import writes nothing, and an import stopped
    by what only the store can find (`ImportStopped`: an id it holds in another
    stream, a stream it holds other events of, a stream it has tombstoned or deleted
    otherwise than the file) keeps
    what it wrote before and resumes after it when run again.

    Without `check`, nothing is read first (for an export known to be whole, a
    large pipe that would need as much room on disk, or a source `checked_import`
    handed back): a line at fault is then a `BadImportLine` naming it when the import
    reaches it, what came before it is written, and the same import run again once it
    is fixed completes the copy.

    `checking`, then `progress`, is told the bytes read so far, now and then.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent, export_log, import_log

        with EventStore.open("sqlite:///shop.db") as shop, open("shop.ndjson", "wb") as out:
            shop.append("order-1", [NewEvent("OrderPlaced", {"cents": 1250})])
            export_log(shop, out)
            original = list(shop.read_all())
        with EventStore.open("memory://") as copy, open("shop.ndjson", "rb") as source:
            report = import_log(copy, source)
            copied = list(copy.read_all())
        assert report.written == 1
        assert [(e.id, e.version, e.recorded_at) for e in copied] == [
            (e.id, e.version, e.recorded_at) for e in original
        ]
    """
    with ExitStack() as stack:
        lines = source
        if check:
            lines = stack.enter_context(
                checked_import(source, checking=checking, max_event_bytes=store.max_event_bytes)
            )
        importer = _Importer(store, store.log_status().head)
        read = 0
        # Lines are parsed, and their events made, on a thread of their own while the store
        # writes the batch before.
        for batch, events, read in read_ahead(_with_events(batches(lines))):
            importer.write(batch, events)
            progress(read)
        progress(read)
    return ImportReport(importer.events, importer.written, importer.skipped, importer.deleted)


def _with_events(
    steps: Iterator[tuple[Step, int]],
) -> Iterator[tuple[Step, list[NewEvent], int]]:
    """Each batch with the events to append, made on the reading thread too."""
    # One append a stream: grouping many short streams in one append_many (one
    # transaction) made an import of 100-event streams slower, 24% of COPY against 37%.
    for step, read in steps:
        yield step, [] if isinstance(step, Deleted) else new_events(step), read


class _Importer:
    """Appends an import's batches and counts what it wrote and what was there."""

    def __init__(self, store: EventStore, head: int) -> None:
        self.store = store
        self.head = head
        """The store's last position before the import: a batch answered with positions
        up to here was stored before (the store answers a repeated append so)."""
        self.events = self.written = self.skipped = self.deleted = 0
        self.deleted_at: dict[str, int] = {}
        """The version each stream the file deleted so far was deleted at."""

    def write(self, step: Step, events: list[NewEvent]) -> None:
        if isinstance(step, Deleted):
            self._delete(step)
            return
        batch = step
        self.events += len(batch)
        first = batch[0][1]
        stream_id = first.stream_id
        try:
            result = self.store.append(
                stream_id, events, expected_version=self._expected(stream_id, first.version)
            )
        except InvalidEvent as error:  # checked before; what the store adds may not pass
            # (personal fields it seals grow past max_event_bytes)
            raise BadImportLine(f"{lines_of(batch)}: {error}") from None
        except StreamTombstoned:
            self._skip_tombstoned(batch)
            return
        except WrongExpectedVersion as conflict:
            self._resume(batch, conflict.actual)
            return
        except DuplicateEventId:  # some of the batch is stored: an import with other bounds
            self._resume(batch, self.store.stream_version(stream_id))
            return
        if result.positions[0] <= self.head:
            self.skipped += len(batch)
        else:
            self.written += len(batch)

    def _expected(self, stream_id: str, version: int) -> int:
        """The version reads show before `version` is appended: 0 right after the stream's
        deletion (its versions go on after the deleted ones)."""
        return 0 if self.deleted_at.get(stream_id) == version - 1 else version - 1

    def _append(self, stream_id: str, batch: Batch, expected: int | None = None) -> None:
        version = batch[0][1].version
        try:
            self.store.append(
                stream_id,
                new_events(batch),
                expected_version=self._expected(stream_id, version)
                if expected is None
                else expected,
            )
        except InvalidEvent as error:
            raise BadImportLine(f"{lines_of(batch)}: {error}") from None
        except StreamTombstoned:  # deleted for ever since this import's first append to it
            raise _tombstoned(batch[0][0], stream_id) from None
        except DuplicateEventId as error:
            number = next((n for n, e in batch if e.id == error.event_id), batch[0][0])
            raise ImportStopped(
                f"line {number}: event {error.event_id} is already in the store, "
                f"{error.detail}; nothing from this line on was imported"
            ) from None

    def _resume(self, batch: Batch, actual: int) -> None:
        """Append what the store lacks of a batch its stream has moved past or short of."""
        number, first = batch[0]
        stream_id = first.stream_id
        if actual == 0 and self._deleted_before(stream_id, first.version):
            self._append(stream_id, batch, expected=0)
            self.written += len(batch)
            return
        if actual < first.version - 1:
            # A stream cannot begin above version 1, and the file does not say whether its
            # store removed the events before (the lines are events, nothing more): the
            # message names both causes, and only one can be put right here.
            raise ImportStopped(
                f"line {number}: {stream_id} version {first.version} cannot follow version "
                f"{actual} in the store: the file starts this stream part-way. From an export "
                "--after or --until, import the events before it first; from a store whose "
                "early events were removed by retention, it cannot be imported as a copy "
                "(the removed events are only in that store's archive)"
            )
        held = list(self.store.read_stream(stream_id, from_version=first.version, limit=len(batch)))
        for (line, event), stored in zip(batch, held, strict=False):
            if stored.id != event.id:
                raise ImportStopped(
                    f"line {line}: the store holds another event at {stream_id} version "
                    f"{event.version} (id {stored.id}, the file's {event.id}); "
                    "it is not a copy of this file"
                )
        self.skipped += len(held)
        rest = batch[len(held) :]
        if rest:
            self._append(stream_id, rest)
            self.written += len(rest)

    def _deleted_before(self, stream_id: str, version: int) -> bool:
        """Whether the store deleted `stream_id` just before `version` and has nothing
        after: an import `--after` the deletion's line, into a copy holding it."""
        deletion = self.store.stream_deletion(stream_id)
        return deletion is not None and deletion.version == version - 1

    def _skip_tombstoned(self, batch: Batch) -> None:
        """Count `batch` as skipped if the store tombstoned its stream after it was written
        (an import run again), else raise: the stream's lines can never be written."""
        number, first = batch[0]
        for _, event in batch:
            # The stream's reads show nothing: each event is looked for by its id.
            stored = self.store.read_event(event.id)
            if stored is None or (stored.stream_id, stored.version) != (
                event.stream_id,
                event.version,
            ):
                raise _tombstoned(number, first.stream_id)
        self.skipped += len(batch)

    def _delete(self, step: Deleted) -> None:
        """Delete the stream as the line says, unless the store holds that deletion."""
        wanted = step.deletion
        stream_id = wanted.stream_id
        held = self.store.stream_deletion(stream_id)
        self.deleted_at[stream_id] = wanted.version
        if held is not None and (held.version, held.tombstone) == (
            wanted.version,
            wanted.tombstone,
        ):
            return  # an import run again
        if held is not None and held.tombstone:
            raise _tombstoned(step.line, stream_id)
        # A soft deletion the store holds at this version becomes the file's tombstone; from
        # any other state the stream must be at the version the line deletes it at.
        soft_here = held is not None and held.version == wanted.version
        try:
            self.store.delete_stream(
                stream_id,
                0 if soft_here else wanted.version,
                tombstone=wanted.tombstone,
                deleted_at=wanted.deleted_at,
            )
        except WrongExpectedVersion as conflict:
            raise ImportStopped(
                f"line {step.line}: {stream_id} is at version {conflict.actual} in the store, "
                f"the file deletes it at version {wanted.version}"
                + (f" (the store deleted it at version {held.version})" if held else "")
                + "; it is not a copy of this file; the lines before this one were imported, "
                "nothing from this line on was"
            ) from None
        self.deleted += 1


def _tombstoned(number: int, stream_id: str) -> ImportStopped:
    """The problem of a line whose stream the store has deleted for ever."""
    # Only the store can know it, as with the ids it holds elsewhere: the check passed, and
    # the lines before this one are in the store (the store's own message says nothing was
    # written, which is true of this append alone).
    return ImportStopped(
        f"line {number}: {stream_id} is tombstoned in the store: it can never be written "
        "again; the lines before this one were imported, nothing from this line on was"
    )
