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
every `MARK_SECONDS`, and again after every read of the store
(`current_low_water_mark`): a run that committed meanwhile may have removed
events that read passed over, which only the archive holds now. An archive
read is opened with the store's keys; an archive that is missing, or ends
below the mark, raises `ArchiveBroken` rather than read as empty.
"""

from __future__ import annotations

import threading
import time
import weakref
from itertools import islice
from typing import TYPE_CHECKING

from eventcraft.eventstore import EventStore, RecordedEvent

from .definition import Definition

if TYPE_CHECKING:
    from .archive_files import ArchiveFiles

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
        return current_low_water_mark(store)
    return known[0]


def current_low_water_mark(store: EventStore) -> int:
    """The store's low-water mark now (one query of a small table), remembered for
    `low_water_mark`."""
    now = time.monotonic()
    mark = store.low_water_mark()
    with _lock:
        _marks[store] = (mark, now)
    return mark


def archive_below(store: EventStore, mark: int) -> ArchiveFiles:
    """The archive of the store's last run, checked to hold the log up to `mark`."""
    from .archive_files import ArchiveBroken, ArchiveFiles

    runs = store.retention.runs()
    if not runs:
        raise ArchiveBroken(
            f"the store's low-water mark is {mark}, but it records no retention run that "
            "says where its archive is"
        )
    archive = ArchiveFiles(runs[-1].archive)
    archive.check_reaches(mark, runs[-1].run)
    return archive


def archived_batch(
    store: EventStore, definition: Definition, after: int, limit: int, mark: int
) -> tuple[list[RecordedEvent], int]:
    """The definition's next events after `after` from the archive (to `mark` at most), and
    the position they take it to: `mark` when the archive has no more of them."""
    read = archive_below(store, mark).read(
        after=after,
        upto=mark,
        categories=definition.categories,
        types=definition.types,
        window=max(limit, 1000),
    )
    events = list(store.open_events(islice(read, limit)))
    last = events[-1].position if events else after
    return events, last if len(events) == limit else mark


def event_at(store: EventStore, position: int) -> RecordedEvent | None:
    """The event at `position`, from the archive at or below the store's low-water mark
    (where the store may no longer hold it), else from the store; None if neither has one.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections import event_at

        store = EventStore.open("sqlite:///shop.db")
        store.append("order-1", [NewEvent("OrderPlaced", {}), NewEvent("OrderPaid", {})])
        event = event_at(store, 2)  # from the archive instead, if retention removed it
        assert event is not None and (event.stream_id, event.type) == ("order-1", "OrderPaid")
        assert event_at(store, 3) is None  # no event there (yet)
        store.close()
    """
    mark = current_low_water_mark(store)
    if position <= mark:
        read = archive_below(store, mark).read(after=position - 1, upto=position, window=1)
        events = list(store.open_events(read))
    else:
        events = list(store.read_all(after=position - 1, limit=1))
    return events[0] if events and events[0].position == position else None
