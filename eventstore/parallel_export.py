"""An export shared among worker processes, for logs where one process is the bottleneck.

Where a store makes its JSON lines in Python, from records (SQLite, memory:
`read_all_json`'s default), that costs a few microseconds an event: one
process exports at a fraction of the speed the database can read. Here
workers (each with its own store, opened from the URL) read ranges of
positions as lines, and the caller writes the ranges in order: the file is
byte for byte the one a single process writes. PostgreSQL makes the lines
from its copied rows at over half a raw COPY's speed: there, at a million
events, starting the workers costs more than they save.
"""

from __future__ import annotations

import multiprocessing
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from typing import IO

from .archive_reads import ArchiveOption
from .json_lines import with_placed
from .store import EventStore

SPAN = 50_000
"""Positions one worker exports at a time."""

_store: EventStore | None = None
"""The worker process's store, opened once by `_open`."""


def _open(url: str, archive: ArchiveOption) -> None:
    global _store
    # As the caller's store reads: with `archive=`, a range below the mark from the archive.
    _store = EventStore.open(url, archive=archive)


Done = tuple[bytes, int, int, int | None]
"""A range's lines, how many events, how many deletions, and the last event's position."""


def _export_range(after: int, until: int, categories: Sequence[str]) -> Done:
    assert _store is not None, "the worker's store is opened by the pool's initializer"
    chunks = _store.read_all_json(after, until, categories=categories or None)
    deletions = _store.placed_deletions(after, until, categories=categories or None)
    done = list(with_placed(chunks, deletions))
    return (
        "".join(text for text, _, _ in done).encode(),
        sum(chunk.events for _, chunk, _ in done),
        sum(added for _, _, added in done),
        done[-1][1].last_position if done else None,
    )


def export_ranges(
    url: str,
    out: IO[bytes],
    *,
    after: int,
    until: int,
    categories: Sequence[str],
    jobs: int,
    progress: Callable[[int], None],
    span: int | None = None,
    archive: ArchiveOption = False,
) -> tuple[int, int, int | None]:
    """Write the lines of the events after `after` up to `until` (and of their streams'
    deletions) to `out`, made by `jobs` worker processes; the number of events and of
    deletions written, and the last event's position."""
    count = deletions = 0
    last = None
    pending: deque[tuple[int, Future[Done]]] = deque()

    def write_first() -> None:
        nonlocal count, deletions, last
        end, future = pending.popleft()
        lines, events, deleted, last_here = future.result()
        out.write(lines)
        count += events
        deletions += deleted
        last = last_here or last
        progress(end - after)

    context = multiprocessing.get_context("spawn")  # no fork of a caller's threads and sockets
    with ProcessPoolExecutor(
        jobs, mp_context=context, initializer=_open, initargs=(url, archive)
    ) as pool:
        for start, end in _ranges(after, until, span or SPAN):
            pending.append((end, pool.submit(_export_range, start, end, categories)))
            # In order; at most two ranges a worker wait in memory.
            while len(pending) > 2 * jobs or (pending and pending[0][1].done()):
                write_first()
        while pending:
            write_first()
    return count, deletions, last


def _ranges(after: int, until: int, span: int) -> Iterator[tuple[int, int]]:
    start = after
    while start < until:
        end = min(start + span, until)
        yield start, end
        start = end
