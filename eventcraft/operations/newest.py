"""Reading the log newest first, as a console does: a page of the log before a position,
events per minute over the last hour, and counts over the latest events.

The store reads forwards only. These read it backwards in windows of
positions: the window just below where the reader stands is read forwards
(an index range on every backend, at most as many events as it has
positions) and yielded in reverse; the next window is sized by what the last
one held, fourfold wider when it was sparse, so a rare category costs a few
more short reads, never a scan from the start, and a dense log reads about
`TARGET_READ` events at a time.
Paging is by position (a keyset): a page ends at the position the next one
is read before.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from eventcraft.eventstore import EventStore, RecordedEvent

from .errors import InputError
from .log import LogFilter

EVERYTHING = LogFilter()

SCAN_BUDGET = 100_000
"""Most events one page request examines for filters the store cannot apply (a
correlation id, a time range); past it, the page ends and says where it stopped."""

FIRST_WINDOW = 64
"""Positions in the first window below the reader."""

TARGET_READ = 2048
"""Events one read aims to return: the next window is sized by the density of the last."""

MOST_READS = 400
"""Most reads one page request makes before it ends and says where it stopped."""

COUNTED = 100_000
"""Most recent events the overview counts by category and per minute."""


@dataclass(frozen=True)
class LogPage:
    """A page of the log, newest first, and where the next (older) one starts."""

    events: list[RecordedEvent]
    older: int | None
    """The position the next page is read before; None when the page reached the start."""
    examined_down_to: int
    """The lowest position this page examined (1 when it reached the start)."""
    exhausted: bool
    """Whether the page stopped on the scan budget before it was full."""


@dataclass(frozen=True)
class Recent:
    """What the latest events of the log hold, counted newest first."""

    per_minute: list[int]
    """Events recorded in each of the last 60 minutes, oldest minute first."""
    by_category: dict[str, int]
    counted: int
    """Events counted, from the newest back."""
    complete: bool
    """Whether the count reached the start of the log (else it stopped at `COUNTED`)."""
    until: datetime
    """The end of the last minute."""


class Backwards:
    """The log's events newest first, below `before`, filtered by category and type in
    the store.

    `floor` is the lowest position examined: every position from it up to
    `before` has been read or skipped by the store's filters, the event at
    `floor` included once it has been handed out.
    """

    def __init__(
        self, store: EventStore, *, before: int | None, where: LogFilter = EVERYTHING
    ) -> None:
        self.store = store
        self.where = where
        self.floor = store.high_water_mark() + 1 if before is None else before
        self.examined = 0
        """Events handed out."""
        self.reads = 0

    def __iter__(self) -> Iterator[RecordedEvent]:
        window = FIRST_WINDOW
        while self.floor > 1:
            low = max(self.floor - 1 - window, 0)
            # At most `floor - 1 - low` events lie in (low, floor): the limit keeps
            # the read from running past the window whatever the filters skip.
            read = self.store.read_all(
                after=low,
                limit=self.floor - 1 - low,
                categories=self.where.categories or None,
                types=self.where.types or None,
            )
            chunk = [event for event in read if event.position < self.floor]
            self.reads += 1
            for event in reversed(chunk):
                self.examined += 1
                self.floor = event.position
                yield event
            self.floor = low + 1
            # Sparse windows (a rare category) widen fast; dense ones stay near the target.
            if len(chunk) * 2 < TARGET_READ:
                window *= 4 if len(chunk) * 8 < TARGET_READ else 2
            else:
                window = max(FIRST_WINDOW, window * TARGET_READ // len(chunk))


def log_page(
    store: EventStore,
    *,
    before: int | None = None,
    limit: int = 50,
    where: LogFilter = EVERYTHING,
    budget: int = SCAN_BUDGET,
) -> LogPage:
    """The newest `limit` events below `before` (the head, if None) that `where` accepts."""
    if limit < 1:
        raise InputError(f"a page holds at least one event, not {limit}")
    if before is not None and before < 1:
        raise InputError(f"a page is read before a position from 1, not {before}")
    reader = Backwards(store, before=before, where=where)
    found: list[RecordedEvent] = []
    exhausted = False
    for event in reader:
        if where.accepts(event):
            found.append(event)
            if len(found) == limit:
                break
        if reader.examined >= budget or reader.reads >= MOST_READS:
            exhausted = True
            break
    older = reader.floor if reader.floor > 1 else None
    return LogPage(found, older, max(reader.floor, 1), exhausted and older is not None)


def recent(store: EventStore, *, now: datetime | None = None, counted: int = COUNTED) -> Recent:
    """Events per minute over the last hour and counts by category, over at most
    `counted` of the newest events."""
    until = (now or datetime.now(UTC)).replace(second=0, microsecond=0) + timedelta(minutes=1)
    since = until - timedelta(minutes=60)
    per_minute = [0] * 60
    categories: Counter[str] = Counter()
    complete = True
    total = 0
    for event in Backwards(store, before=None):
        if total >= counted:
            complete = False
            break
        total += 1
        categories[event.category] += 1
        if since <= event.recorded_at < until:
            per_minute[int((event.recorded_at - since).total_seconds() // 60)] += 1
    return Recent(
        per_minute=per_minute,
        by_category=dict(sorted(categories.items())),
        counted=total,
        complete=complete,
        until=until,
    )
