"""The file an import reads: its lines made into events, grouped into the appends the
import makes, and checked whole before anything is written.

The check asks nothing of the store. Every line parses into an event with every
field, its stream id and type names the store takes for new ones; each stream's
versions continue from one of its lines to the next, in file order (its first line
may begin anywhere: an export `--after` cuts streams, and only the store knows what
it holds before); and each append passes the store's own checks of a batch
(`PreparedBatch`: ids, times, tags, and the JSON of data and metadata against the
store's `max_event_bytes`), so that no rule is written twice. What only the store
can find, an id it holds in another stream or another event at a version, is found
as the import writes, which resumes when run again.

The check keeps each stream's last version: its memory grows with the streams of a
file, not with its events. A source that cannot be read twice (a pipe, standard
input) is copied to a temporary file as it is checked, and the import reads the copy.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from typing import IO

import orjson

from eventcraft.eventstore import InvalidEvent, NewEvent, RecordedEvent
from eventcraft.eventstore.encoding import PreparedBatch, check_new_name, check_stream_id

from .documents import event_from_document
from .errors import InputError, Problems

BATCH = 5_000
"""Most events of one stream an import appends at once (PostgreSQL sends a large batch
in parts, in one transaction)."""

Batch = list[tuple[int, RecordedEvent]]
"""Consecutive events of one stream, each with its line number."""

Progress = Callable[[int], None]

_TYPES_REMEMBERED = 10_000
"""Most event types whose check a read remembers: a file has a few, repeated."""


@contextmanager
def checked(source: IO[bytes], *, max_event_bytes: int, progress: Progress) -> Iterator[IO[bytes]]:
    """`source` checked whole, then ready to be read again from where it was handed over;
    `InputError` naming the first line at fault, before the caller has written anything.

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
            raise Problems(_cannot_copy(error)) from None
        _check(_copied(source, spool), max_event_bytes, progress)
        try:
            spool.seek(0)  # writes what is buffered first
        except OSError as error:
            raise Problems(_cannot_copy(error)) from None
        yield spool


def _check(lines: Iterable[bytes], max_event_bytes: int, progress: Progress) -> None:
    streams: dict[str, tuple[int, int]] = {}  # each stream's last version so far, its line
    read = 0
    try:
        for batch, read in batches(lines):
            number, first = batch[0]
            before = streams.get(first.stream_id)
            if before is not None and first.version != before[0] + 1:
                raise InputError(
                    f"line {number}: {first.stream_id!r} version {first.version} does not "
                    f"follow version {before[0]} (line {before[1]}): a stream's lines must "
                    "go one version at a time"
                )
            _check_append(batch, max_event_bytes)
            last_line, last = batch[-1]
            streams[first.stream_id] = (last.version, last_line)
            progress(read)
    except InputError as error:
        raise InputError(f"{error}; nothing was imported") from None
    progress(read)


def _check_append(batch: Batch, max_event_bytes: int) -> None:
    """The store's own checks of the append of `batch`, which it makes again when the
    import appends it; made here, before anything is written, to name the line."""
    stream_id = batch[0][1].stream_id
    try:
        PreparedBatch(stream_id, new_events(batch), max_event_bytes).all()
    except InvalidEvent as error:
        for number, event in batch:  # which line: each alone, as the store sees it
            try:
                PreparedBatch(stream_id, new_events([(number, event)]), max_event_bytes).all()
            except InvalidEvent as alone:
                # The store names an event by its place in the append ("event 0 ('Placed')
                # for stream 'order-1'"), which means nothing to the reader of a file.
                said = str(alone).replace(
                    f"event 0 ({event.type!r}) for stream {stream_id!r}",
                    f"{stream_id!r} version {event.version}",
                    1,
                )
                raise InputError(f"line {number}: {said}") from None
        raise InputError(f"{lines_of(batch)}: {error}") from None  # the batch as a whole


def _copied(source: Iterable[bytes], spool: IO[bytes]) -> Iterator[bytes]:
    """The lines of `source`, each written to `spool` as it is read."""
    for line in source:
        try:
            spool.write(line)
        except OSError as error:
            raise Problems(_cannot_copy(error)) from None
        yield line


def _cannot_copy(error: OSError) -> str:
    return (
        f"cannot copy the input to a temporary file in {tempfile.gettempdir()} to check it "
        f"before importing: {error.strerror or error}; TMPDIR names another folder; "
        "nothing was imported"
    )


def batches(lines: Iterable[bytes]) -> Iterator[tuple[Batch, int]]:
    """The appends an import makes of `lines`, each with the bytes read so far: events of
    one stream, each one version after the last, up to BATCH.

    At a malformed line the batch before it comes first, then the `InputError`, so
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
    except InputError:
        if batch:
            yield batch, read
        raise
    if batch:
        yield batch, read


def read_export(lines: Iterable[bytes]) -> Iterator[tuple[int, RecordedEvent]]:
    """The events of an export's lines, each with its line number; `InputError` at the
    first malformed line, naming it. Blank lines are passed over."""
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
            event = event_from_document(document)
            if event.stream_id != stream_id:
                stream_id = check_stream_id(event.stream_id)
            if event.type not in types:
                check_new_name("type", event.type)
                if len(types) < _TYPES_REMEMBERED:
                    types.add(event.type)
        except orjson.JSONDecodeError as error:
            raise InputError(f"line {number}: not JSON: {error}") from None
        except ValueError as error:
            raise InputError(f"line {number}: {error}") from None
        yield number, event


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
