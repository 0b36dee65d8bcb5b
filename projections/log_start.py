"""Where projections read the log from: the archive below the store's low-water mark, the
store above it.

Retention removes events at or below a mark only after the Parquet archive
holds every event up to it, and it never sets the mark past a projection's
checkpoint it was told of. So a projection beyond the mark reads the store
as before, and one at or below it (a new projection, a rebuild, one whose
checkpoint retention was not told) reads the archive up to the mark, then
the store: the events it applies are the ones it would have applied before
retention ran. The mark is read from the store again for a read below the
mark a store object last saw, for a read from position 0, and at least
every `MARK_SECONDS`; an archive read is opened with the store's keys.
"""

from __future__ import annotations

import threading
import time
import weakref
from itertools import islice

from eventcraft.eventstore import EventStore, RecordedEvent

from .definition import Definition

MARK_SECONDS = 5.0
"""Longest a store object's low-water mark is used before it is read again."""

_marks: weakref.WeakKeyDictionary[EventStore, tuple[int, float]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def low_water_mark(store: EventStore, after: int) -> int:
    """The store's low-water mark, read again when a read from `after` could fall below it."""
    now = time.monotonic()
    with _lock:
        known = _marks.get(store)
    if known is None or after == 0 or after < known[0] or now - known[1] > MARK_SECONDS:
        mark = store.low_water_mark()
        with _lock:
            _marks[store] = (mark, now)
        return mark
    return known[0]


def archived_batch(
    store: EventStore, definition: Definition, after: int, limit: int, mark: int
) -> tuple[list[RecordedEvent], int]:
    """The definition's next events after `after` from the archive (to `mark` at most), and
    the position they take it to: `mark` when the archive has no more of them."""
    from .archive_files import ArchiveFiles

    runs = store.retention.runs()
    archive = ArchiveFiles(runs[-1].archive)
    read = archive.read(
        after=after,
        upto=mark,
        categories=definition.categories,
        types=definition.types,
        window=max(limit, 1000),
    )
    events = list(store.open_events(islice(read, limit)))
    last = events[-1].position if events else after
    return events, last if len(events) == limit else mark
