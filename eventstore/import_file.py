"""The file an import reads: its lines made into events and deletions, grouped into the
appends and deletions the import makes, and checked whole before anything is written.

The check asks nothing of the store. Every line parses into an event with every
field, its stream id and type names the store takes for new ones; each stream's
versions continue from one of its lines to the next, in file order (its first line
may begin anywhere: an export after a position cuts streams, and only the store knows
what it holds before); and each append passes the store's own checks of a batch
(`check_events`: ids, times, tags, and the JSON of data and metadata against the
store's `max_event_bytes`), so that no rule is written twice. What only the store
can find, an id it holds in another stream or another event at a version, is found
as the import writes, which resumes when run again. A deletion line
(`json_lines.py`) follows its stream's line at the version it deleted,
and no line of a stream follows its tombstone.

A line at fault is a `BadImportLine` naming it; what stops an import where only the
store could tell is an `ImportStopped`.

The check keeps each stream's last version: its memory grows with the streams of a
file, not with its events. A source that cannot be read twice (a pipe, standard
input) is copied to a temporary file as it is checked, and the import reads the copy.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import IO, Any

import orjson

from .deletion import StreamDeletion
from .encoding import check_events, check_new_name, check_stream_id
from .errors import BadImportLine, ImportStopped, InvalidEvent
from .events import NewEvent, RecordedEvent

BATCH = 5_000
"""Most events of one stream an import appends at once (PostgreSQL sends a large batch
in parts, in one transaction)."""

Batch = list[tuple[int, RecordedEvent]]
"""Consecutive events of one stream, each with its line number."""


@dataclass(frozen=True)
class Deleted:
    """A deletion line of the file: the import deletes its stream there."""

    line: int
    deletion: StreamDeletion
    """As the file gives it: `deleted_at` is the original's, which the copy keeps."""


Step = Batch | Deleted
"""What an import does next: an append, or a deletion."""

Progress = Callable[[int], None]
"""Told how far a long task has come (bytes, positions), now and then."""

_TYPES_REMEMBERED = 10_000
"""Most event types whose check a read remembers: a file has a few, repeated."""


@contextmanager
def checked(source: IO[bytes], *, max_event_bytes: int, progress: Progress) -> Iterator[IO[bytes]]:
    """`source` checked whole, then ready to be read again from where it was handed over;
    `BadImportLine` naming the first line at fault, before the caller has written anything.

    A source that cannot be read twice is copied to a temporary file as it is
    checked, and the copy is what is handed back (and removed afterwards).
    `progress` is told the bytes checked so far, now and then.
    """
    if source.seekable():
        start = source.tell()
        _check(source, max_event_bytes, progress)
        source.seek(start)
        yield source
        return
    with ExitStack() as stack:
        try:
            spool = stack.enter_context(tempfile.TemporaryFile(prefix="eventcraft-import-"))
        except OSError as error:
            raise ImportStopped(_cannot_copy(error)) from None
        _check(_copied(source, spool), max_event_bytes, progress)
        try:
            spool.seek(0)  # writes what is buffered first
        except OSError as error:
            raise ImportStopped(_cannot_copy(error)) from None
        yield spool


def _check(lines: Iterable[bytes], max_event_bytes: int, progress: Progress) -> None:
    streams: dict[str, tuple[int, int]] = {}  # each stream's last version so far, its line
    tombstones: dict[str, int] = {}  # the line of each stream's tombstone
    read = 0
    try:
        for batch, read in batches(lines):
            if isinstance(batch, Deleted):
                _check_deletion(batch, streams, tombstones)
                progress(read)
                continue
            number, first = batch[0]
            if first.stream_id in tombstones:
                raise BadImportLine(
                    f"line {number}: {first.stream_id!r} version {first.version} comes after "
                    f"the line that tombstoned it (line {tombstones[first.stream_id]}): a "
                    "tombstoned stream is never written again"
                )
            before = streams.get(first.stream_id)
            if before is not None and first.version != before[0] + 1:
                raise BadImportLine(
                    f"line {number}: {first.stream_id!r} version {first.version} does not "
                    f"follow version {before[0]} (line {before[1]}): a stream's lines must "
                    "go one version at a time"
                )
            _check_append(batch, max_event_bytes)
            last_line, last = batch[-1]
            streams[first.stream_id] = (last.version, last_line)
            progress(read)
    except BadImportLine as error:
        raise BadImportLine(f"{error}; nothing was imported") from None
    progress(read)


def _check_deletion(
    deleted: Deleted, streams: dict[str, tuple[int, int]], tombstones: dict[str, int]
) -> None:
    """A deletion follows its stream's line at the version deleted (of a stream with lines
    before it in the file; the store checks one without against what it holds)."""
    deletion = deleted.deletion
    stream_id = deletion.stream_id
    if stream_id in tombstones:
        raise BadImportLine(
            f"line {deleted.line}: {stream_id!r} is deleted again after the line that "
            f"tombstoned it (line {tombstones[stream_id]})"
        )
    before = streams.get(stream_id)
    if before is not None and deletion.version != before[0]:
        raise BadImportLine(
            f"line {deleted.line}: the deletion of {stream_id!r} at version {deletion.version} "
            f"does not follow its line at that version (its line before, {before[1]}, is "
            f"version {before[0]}): a deletion follows its stream's event at the version deleted"
        )
    if deletion.tombstone:
        tombstones[stream_id] = deleted.line


def _check_append(batch: Batch, max_event_bytes: int) -> None:
    """The store's own checks of the append of `batch`, which it makes again when the
    import appends it; made here, before anything is written, to name the line."""
    stream_id = batch[0][1].stream_id
    try:
        check_events(stream_id, new_events(batch), max_event_bytes)
    except InvalidEvent as error:
        for number, event in batch:  # which line: each alone, as the store sees it
            try:
                check_events(stream_id, new_events([(number, event)]), max_event_bytes)
            except InvalidEvent as alone:
                # The store names an event by its place in the append ("event 0 ('Placed')
                # for stream 'order-1'"), which means nothing to the reader of a file.
                said = str(alone).replace(
                    f"event 0 ({event.type!r}) for stream {stream_id!r}",
                    f"{stream_id!r} version {event.version}",
                    1,
                )
                raise BadImportLine(f"line {number}: {said}") from None
        raise BadImportLine(f"{lines_of(batch)}: {error}") from None  # the batch as a whole


def _copied(source: Iterable[bytes], spool: IO[bytes]) -> Iterator[bytes]:
    """The lines of `source`, each written to `spool` as it is read."""
    for line in source:
        try:
            spool.write(line)
        except OSError as error:
            raise ImportStopped(_cannot_copy(error)) from None
        yield line


def _cannot_copy(error: OSError) -> str:
    return (
        f"cannot copy the input to a temporary file in {tempfile.gettempdir()} to check it "
        f"before importing: {error.strerror or error}; TMPDIR names another folder; "
        "nothing was imported"
    )


def batches(lines: Iterable[bytes]) -> Iterator[tuple[Step, int]]:
    """The appends and deletions an import makes of `lines`, each with the bytes read so
    far: events of one stream, each one version after the last, up to BATCH; a deletion
    between the batches before and after it.

    At a malformed line the batch before it comes first, then the `BadImportLine`, so
    that a check sees every line before the first fault.
    """
    read = 0

    def measured() -> Iterator[bytes]:
        nonlocal read
        for line in lines:
            read += len(line)
            yield line

    batch: Batch = []
    try:
        for number, event in read_export(measured()):
            if isinstance(event, StreamDeletion):
                if batch:
                    yield batch, read
                    batch = []
                yield Deleted(number, event), read
                continue
            if batch:
                last = batch[-1][1]
                if (
                    event.stream_id != last.stream_id
                    or event.version != last.version + 1
                    or len(batch) >= BATCH
                ):
                    yield batch, read
                    batch = []
            batch.append((number, event))
    except BadImportLine:
        if batch:
            yield batch, read
        raise
    if batch:
        yield batch, read


def read_export(
    lines: Iterable[bytes],
) -> Iterator[tuple[int, RecordedEvent | StreamDeletion]]:
    """The events and deletions of an export's lines, each with its line number;
    `BadImportLine` at the first malformed line, naming it. Blank lines are passed over."""
    # The names the store would refuse, refused here where the line is known: a stream id
    # once for a run of its lines, a type once.
    stream_id = ""
    types: set[str] = set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            document = orjson.loads(line)
            if not isinstance(document, dict):
                raise ValueError(f"a line holds a JSON object, not {type(document).__name__}")
            if "deletion" in document:
                yield number, _deletion(document)
                continue
            event = _event(document)
            if event.stream_id != stream_id:
                stream_id = check_stream_id(event.stream_id)
            if event.type not in types:
                check_new_name("type", event.type)
                if len(types) < _TYPES_REMEMBERED:
                    types.add(event.type)
        except orjson.JSONDecodeError as error:
            column = _column(line, error)
            raise BadImportLine(
                f"line {number}: not JSON: {error.msg} at column {column}"
            ) from None
        except ValueError as error:
            raise BadImportLine(f"line {number}: {error}") from None
        yield number, event


def _column(line: bytes, error: orjson.JSONDecodeError) -> int:
    """Where on its line the decoder stopped, counted from 1: the decoder counts lines of
    its own, and one that ends early ends after the line's last character, not its newline."""
    shown = line.rstrip(b"\r\n").decode("utf-8", "replace")
    return min(error.pos, len(shown)) + 1


def _deletion(document: Mapping[str, Any]) -> StreamDeletion:
    """The deletion a line describes (`eventstore/json_lines.py`); `ValueError` naming the
    field that is wrong."""
    kind = document["deletion"]
    if kind not in ("soft", "tombstone"):
        raise ValueError(f"deletion must be 'soft' or 'tombstone', not {kind!r:.80}")
    missing = [name for name in ("stream_id", "version", "deleted_at") if name not in document]
    if missing:
        raise ValueError(f"deletion without {', '.join(missing)}")
    stream_id, version, deleted_at = (document[n] for n in ("stream_id", "version", "deleted_at"))
    if not isinstance(stream_id, str):
        raise ValueError(f"stream_id must be a string, not {stream_id!r:.80}")
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise ValueError(f"a deletion's version is a whole number from 0, not {version!r:.80}")
    try:
        at = datetime.fromisoformat(deleted_at)
    except (TypeError, ValueError):
        at = None
    if at is None or at.tzinfo is None:
        raise ValueError(
            f"deleted_at must be an ISO 8601 time with its zone, not {deleted_at!r:.80}"
        )
    return StreamDeletion(check_stream_id(stream_id), version, kind == "tombstone", at)


def new_events(batch: Batch) -> list[NewEvent]:
    """The events to append for `batch`, keeping each one's id, time and tags."""
    return [
        NewEvent(e.type, e.data, e.metadata, id=e.id, recorded_at=e.recorded_at, tags=e.tags)
        for _, e in batch
    ]


def lines_of(batch: Batch) -> str:
    """`line N`, or `lines N to M`: where in the file `batch` is."""
    first, last = batch[0][0], batch[-1][0]
    return f"line {first}" if first == last else f"lines {first} to {last}"


FIELDS = ("position", "id", "stream_id", "version", "type", "recorded_at", "data", "metadata")
"""The fields every document holds, in the order a document lists them; `tags` follows,
and a document without it (an export of a release before tags) has none."""


def _event(document: Mapping[str, Any]) -> RecordedEvent:
    """The event a document describes; `ValueError` naming the field that is wrong."""
    missing = [name for name in FIELDS if name not in document]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    try:
        event = RecordedEvent(
            id=uuid.UUID(document["id"]),
            stream_id=_text(document, "stream_id"),
            version=_count(document, "version"),
            position=_count(document, "position"),
            type=_text(document, "type"),
            data=_object(document, "data"),
            metadata=_object(document, "metadata"),
            recorded_at=datetime.fromisoformat(document["recorded_at"]),
            tags=_tags(document),
        )
    except (TypeError, AttributeError) as error:
        raise ValueError(str(error)) from error
    if event.recorded_at.tzinfo is None:
        raise ValueError("recorded_at has no time zone")
    return event


def _text(document: Mapping[str, Any], name: str) -> str:
    value = document[name]
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, not {value!r}")
    return value


def _tags(document: Mapping[str, Any]) -> tuple[str, ...]:
    """The document's tags, sorted, each once (the store checks each as it appends them)."""
    value = document.get("tags", [])
    if not isinstance(value, list) or not all(isinstance(tag, str) for tag in value):
        raise ValueError(f"tags must be a list of strings, not {value!r:.80}")
    return tuple(sorted(set(value)))


def _count(document: Mapping[str, Any], name: str) -> int:
    value = document[name]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a whole number from 1, not {value!r}")
    return value


def _object(document: Mapping[str, Any], name: str) -> dict[str, Any]:
    value = document[name]
    if not isinstance(value, dict):
        raise ValueError(f"{name} must be a JSON object, not {value!r}")
    return value
