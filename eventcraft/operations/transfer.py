"""Export and import, as the shells ask for them: the store's own (`export_log`,
`import_log`), with the checks of what was typed made first, in the words of the flags
that were typed, and the store's refusals of a file made `InputError` and `Problems`.

A file at fault is an `InputError` naming its line; what only the store can find (an id
it holds in another stream, another event at a version, a stream it tombstoned) is a
`Problems`: the import keeps what it wrote and resumes after it when run again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import IO

from eventcraft.eventstore import (
    MAX_EVENT_BYTES,
    BadImportLine,
    EventStore,
    ExportReport,
    ImportReport,
    ImportStopped,
    JsonLines,
    checked_import,
    export_lines,
    export_log,
    import_log,
)

from .errors import InputError, Problems
from .stores import is_memory

Progress = Callable[[int], None]
"""Told the positions or bytes done so far, now and then."""


def no_progress(done: int) -> None:
    """A `Progress` that shows nothing."""


def check_export(*, after: int, until: int | None, jobs: int = 1) -> None:
    """`InputError` if an export of these bounds and jobs cannot be made: checked before a
    shell opens the file it writes."""
    if until is not None and until < after:
        raise InputError(f"--until {until} is before --after {after}: nothing to export")
    if jobs < 1:
        raise InputError(f"--jobs must be 1 or more, not {jobs}")


def export_span(store: EventStore, *, after: int, until: int | None) -> int:
    """How many positions an export covers, for a progress bar: to `until` or the
    high-water mark."""
    end = store.high_water_mark() if until is None else until
    return max(end - after, 0)


def exported(
    store: EventStore, *, after: int = 0, categories: Sequence[str] = ()
) -> Iterator[tuple[str, JsonLines, int]]:
    """The lines `export_events` writes of the log after `after` (of `categories`, if
    given) up to the high-water mark now, chunk by chunk (`export_lines`): a download's."""
    return export_lines(store, after=after, categories=categories)


def export_events(
    store: EventStore,
    out: IO[bytes],
    *,
    after: int = 0,
    until: int | None = None,
    categories: Sequence[str] = (),
    progress: Progress = no_progress,
    jobs: int = 1,
) -> ExportReport:
    """Write the log after `after` and up to `until` (of `categories`, if given) to `out`
    (`export_log`); `InputError`, in the flags' words, for bounds or jobs it cannot take."""
    check_export(after=after, until=until, jobs=jobs)
    if jobs > 1 and is_memory(store.url):
        raise InputError("--jobs needs a store other processes can open, not a memory store")
    return export_log(
        store, out, after=after, until=until, categories=categories, progress=progress, jobs=jobs
    )


def events_in_store(store: EventStore) -> int:
    """The store's head: 0 for an empty store (an import into any other asks first)."""
    return store.log_status().head


def check_import_target(url: str) -> None:
    """Refuse a store an import would leave nothing in: `memory://` ends with the command."""
    if is_memory(url):
        raise InputError(
            "a memory:// store ends with the command, and the import with it: "
            "import into sqlite:///PATH or postgresql://..."
        )


@contextmanager
def import_input(
    source: IO[bytes],
    *,
    check: bool = True,
    checking: Progress = no_progress,
    max_event_bytes: int = MAX_EVENT_BYTES,
) -> Iterator[IO[bytes]]:
    """`source`, checked whole unless not `check` (`checked_import`), to be given to
    `import_events(..., check=False)`: checked before the store is opened, a refused file
    leaves no new store behind. The default `max_event_bytes` is that of a store opened
    by `open_store`."""
    if not check:
        yield source
        return
    with (
        _as_operation_errors(),
        checked_import(source, checking=checking, max_event_bytes=max_event_bytes) as lines,
    ):
        yield lines


def nothing_in(source: IO[bytes]) -> bool:
    """Whether `source` holds no line but blank ones, from where it stands (and is left).
    A source that cannot go back (a pipe) is looked at only as far as its first byte: a
    pipe of blank lines holds something."""
    if source.seekable():
        start = source.tell()
        try:
            return all(not line.strip() for line in source)  # up to the first that is not
        finally:
            source.seek(start)
    peek: Callable[[int], bytes] | None = getattr(source, "peek", None)
    return peek is not None and peek(1) == b""


def import_events(
    store: EventStore,
    source: IO[bytes],
    *,
    progress: Progress = no_progress,
    checking: Progress = no_progress,
    check: bool = True,
) -> ImportReport:
    """Append the events of an export read from `source`, keeping ids, versions and times
    (`import_log`, which checks the whole of it first unless not `check`)."""
    with _as_operation_errors():
        return import_log(store, source, progress=progress, checking=checking, check=check)


@contextmanager
def _as_operation_errors() -> Iterator[None]:
    """The store's refusals of an import as the shells show them: the file's fault an
    `InputError` (exit 2), what the store holds a `Problems` (exit 1); same words."""
    try:
        yield
    except BadImportLine as error:
        raise InputError(str(error)) from None
    except ImportStopped as error:
        raise Problems(str(error)) from None
