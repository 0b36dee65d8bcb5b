"""Reading the log as an operator does: streams, a stream, the global log, one event,
a correlation's causation tree, and counts. Every shell shows what these return."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from eventcraft.eventstore import (
    EventStore,
    Query,
    QueryItem,
    RecordedEvent,
    ReplicaLag,
    category_of,
)
from eventcraft.projections import narrowed

from .errors import InputError, NotFound
from .numbers import whole_number

FOLLOW_WAIT = 1.0
"""Longest a follower waits for the next event before it checks whether to stop, in s."""

TAGGED_PAGE = 1000
"""Events one read by tags brings."""


@dataclass(frozen=True)
class StreamSummary:
    stream_id: str
    version: int
    first_recorded_at: datetime | None
    last_recorded_at: datetime | None


@dataclass(frozen=True)
class LogFilter:
    """Which events of the log an operator asks for; empty means all of them."""

    categories: Sequence[str] = ()
    types: Sequence[str] = ()
    tags: Sequence[str] = ()
    """Only events carrying all of these tags."""
    correlation_id: str | None = None
    since: datetime | None = None
    """Only events recorded at or after this time."""
    until: datetime | None = None
    """Only events recorded before this time."""
    query: Query | None = None
    """Only events matching this query of types and tags (a projection's own), read by it."""

    def accepts(self, event: RecordedEvent) -> bool:
        """Whether the event passes the filters the store does not apply itself (a read by
        tags, `read_query`, has no categories)."""
        if self.categories and event.category not in self.categories:
            return False
        if self.tags and not set(self.tags).issubset(event.tags):
            return False
        if self.query is not None and not self.query.matches_event(event):
            return False
        if self.since is not None and event.recorded_at < self.since:
            return False
        if self.until is not None and event.recorded_at >= self.until:
            return False
        return self.correlation_id is None or (
            str(event.metadata.get("correlation_id")) == self.correlation_id
        )


@dataclass
class TraceNode:
    """An event of a correlation and the events it caused, in position order."""

    event: RecordedEvent
    caused: list[TraceNode] = field(default_factory=list)


@dataclass(frozen=True)
class LogStats:
    head: int
    high_water_mark: int
    events: int
    by_category: dict[str, int]
    by_type: dict[str, int]
    first_recorded_at: datetime | None
    last_recorded_at: datetime | None
    replica: ReplicaLag | None = None
    """How far the store's read replica is behind, when it reads one."""


def streams(
    store: EventStore, *, category: str | None, after: str | None, limit: int
) -> list[StreamSummary]:
    """Streams in id order, with their version and first and last event times."""
    listed = store.list_streams(category=category, after=after, limit=limit)
    return [_summary(store, info.stream_id) for info in listed]


def _summary(store: EventStore, stream_id: str) -> StreamSummary:
    first = next(iter(store.read_stream(stream_id, limit=1)), None)
    last = next(iter(store.read_stream(stream_id, backwards=True, limit=1)), None)
    return StreamSummary(
        stream_id,
        last.version if last else 0,
        first.recorded_at if first else None,
        last.recorded_at if last else None,
    )


def stream_search(
    store: EventStore, *, prefix: str = "", category: str | None, after: str | None, limit: int
) -> list[StreamSummary]:
    """Streams whose id starts with `prefix`, in id order, after `after` (keyset paging).

    The store lists streams by id from a key, so a prefix is a range: it starts
    at the prefix and ends at the first id without it. That holds where ids sort
    by code point (memory, SQLite, PostgreSQL in a C collation); a linguistic
    collation, which skips punctuation, can put `order1` between `order-1` and
    `order-2`, and the search then ends early.
    """
    start = after if after is not None and after >= prefix else None
    found: list[str] = []
    wanted = category is None or category_of(prefix) == category
    if start is None and prefix and wanted and store.stream_version(prefix) > 0:
        found.append(prefix)
    # At most `limit` streams are listed: the loop stops there or where the prefix ends.
    for info in store.list_streams(category=category, after=start or prefix or None, limit=limit):
        if len(found) >= limit or not info.stream_id.startswith(prefix):
            break
        found.append(info.stream_id)
    return [_summary(store, stream_id) for stream_id in found]


def stream_events(
    store: EventStore, stream_id: str, *, from_version: int | None, limit: int | None
) -> list[RecordedEvent]:
    """A stream's events in version order; `NotFound` for a stream with none."""
    events = list(store.read_stream(stream_id, from_version=from_version, limit=limit))
    if not events and store.stream_version(stream_id) == 0:
        raise NotFound(f"no stream {stream_id!r} in the store")
    return events


def log_events(
    store: EventStore, *, after: int, limit: int | None, where: LogFilter
) -> Iterator[RecordedEvent]:
    """The global log after `after`, filtered, at most `limit` events.

    With tags, or a projection's query, the read is by query (types and tags),
    which the store serves from its indexes: a rare tag costs its own events,
    not a pass over the log.
    """
    query = _query_of(where)
    if query is False:
        return
    if query is not None:
        events = _by_query(store, after, query)
    else:
        events = store.read_all(
            after=after, categories=where.categories or None, types=where.types or None
        )
    shown = 0
    for event in events:
        if limit is not None and shown >= limit:
            return
        if where.accepts(event):
            shown += 1
            yield event


def _query_of(where: LogFilter) -> Query | Literal[False] | None:
    """The query the filters read by (tags, or a projection's query and types), None for
    a read of the log by its categories and types; False if no event can pass them."""
    if where.query is not None:
        return narrowed(where.query, tuple(where.types) or None) or False
    if where.tags:
        return Query([QueryItem(types=where.types, tags=where.tags)])
    return None


@dataclass(frozen=True)
class Tail:
    """What one poll of a live tail found, and how far it read."""

    events: list[RecordedEvent]
    """The events after `after` the filters accept, oldest first: at most `limit`."""
    read_to: int
    """Every event after `after` up to here was read (or needs no reading): the next poll
    starts after it."""
    read: int
    """Events the store returned for it: at most `scan`."""


def tail(store: EventStore, *, after: int, limit: int, scan: int, where: LogFilter) -> Tail:
    """The next events after `after` that the filters accept, reading at most `scan` events
    of the log (those of its categories and types, or of its query), so that a filter
    applied one event at a time (a correlation, a time) costs a bounded stretch a poll,
    however long the log it finds nothing in."""
    head = store.high_water_mark()
    query = _query_of(where)
    if query is False:
        return Tail([], max(after, head), 0)
    if query is not None:
        found = store.read_query(query, after=after, limit=scan)
        read, covered = found.events, found.head
    else:
        read = list(
            store.read_all(
                after=after,
                limit=scan,
                categories=where.categories or None,
                types=where.types or None,
            )
        )
        # A read cut short covered up to its last event; one that was not, the whole log
        # as it was before it began (and anything it found appended since).
        covered = read[-1].position if len(read) >= scan else max(head, after)
    shown = []
    for event in read:
        if where.accepts(event):
            shown.append(event)
            if len(shown) == limit:
                return Tail(shown, event.position, len(read))
    last = read[-1].position if read else after
    return Tail(shown, max(covered, last, after), len(read))


def _by_query(store: EventStore, after: int, query: Query) -> Iterator[RecordedEvent]:
    while True:
        found = store.read_query(query, after=after, limit=TAGGED_PAGE)
        yield from found.events
        if len(found.events) < TAGGED_PAGE:
            return  # the read covered every matching event there is now
        after = found.head


def follow(
    store: EventStore, *, after: int, where: LogFilter, stopped: Callable[[], bool]
) -> Iterator[RecordedEvent]:
    """The log after `after` and every event appended later, until `stopped()`."""
    while not stopped():
        # The read goes at least this far: the events it filtered out up to here
        # are passed for good, and the wait starts from there.
        read_to = store.high_water_mark()
        for event in log_events(store, after=after, limit=None, where=where):
            yield event
            after = event.position
        after = max(after, read_to)
        store.wait_for_events(after, FOLLOW_WAIT)


def find_event(store: EventStore, key: str) -> RecordedEvent:
    """The event at a position (a whole number) or with an id (a UUID)."""
    if key.isascii() and key.isdigit():
        position = whole_number(key, "a position")
        found = next(iter(store.read_all(after=position - 1, limit=1)), None) if position else None
        if found is None or found.position != position:
            raise NotFound(f"no event at position {position}")
        return found
    try:
        event_id = uuid.UUID(key)
    except ValueError:
        raise InputError(f"{key!r} is neither a position nor an event id") from None
    found = store.read_event(event_id)
    if found is None:
        raise NotFound(f"no event with id {event_id}")
    return found


@dataclass(frozen=True)
class TracePage:
    """A page of a correlation's events, as trees, and where the next page starts."""

    roots: list[TraceNode]
    """The page's events each under its cause, if the cause is on the page too."""
    events: int
    """Events on the page."""
    next_after: int | None
    """The position the next page reads after; None when the search reached its end."""
    examined_to: int
    """The last position examined: every one from the page's start to it was read."""


def trace(
    store: EventStore, correlation_id: str, *, after: int = 0, before: int | None = None
) -> list[TraceNode]:
    """The correlation's events as trees: each under the event that caused it.

    The store has no index of correlations: this reads the log, all of it, or only
    the positions between `after` and `before` (a correlation's events are usually
    close together, and a console cannot wait for a scan of millions).
    """
    where = LogFilter(correlation_id=correlation_id)
    span = None if before is None else max(before - 1 - after, 0)
    read = store.read_all(after=after, limit=span) if span != 0 else iter(())
    events = [e for e in read if (before is None or e.position < before) and where.accepts(e)]
    if not events:
        raise NotFound(_no_trace(correlation_id, after, before))
    return _tree(events)


def trace_page(
    store: EventStore,
    correlation_id: str,
    *,
    after: int = 0,
    before: int | None = None,
    limit: int,
    budget: int = 100_000,
) -> TracePage:
    """At most `limit` of the correlation's events after `after` (and before `before`),
    examining at most `budget` events of the log: a page costs what it reads, not what
    the correlation or the log holds. `NotFound` if the search ends finding none."""
    where = LogFilter(correlation_id=correlation_id)
    span = budget if before is None else min(budget, max(before - 1 - after, 0))
    found: list[RecordedEvent] = []
    examined_to = after
    read = 0
    for event in store.read_all(after=after, limit=span) if span else ():
        if before is not None and event.position >= before:
            break
        if where.accepts(event):
            if len(found) == limit:  # one more than the page: there is a next one
                return TracePage(_tree(found), limit, found[-1].position, examined_to)
            found.append(event)
        examined_to = event.position
        read += 1
    more = read == budget and (before is None or examined_to < before - 1)
    if not found and not more:
        raise NotFound(_no_trace(correlation_id, after, before))
    return TracePage(_tree(found), len(found), examined_to if more else None, examined_to)


def _no_trace(correlation_id: str, after: int, before: int | None) -> str:
    within = "" if before is None else f" in positions {after + 1} to {before - 1}"
    return f"no event with correlation id {correlation_id!r}{within}"


def _tree(events: list[RecordedEvent]) -> list[TraceNode]:
    nodes = {str(event.id): TraceNode(event) for event in events}
    roots = []
    for node in nodes.values():
        cause = nodes.get(str(node.event.metadata.get("causation_id")))
        if cause is None or cause is node:
            roots.append(node)
        else:
            cause.caused.append(node)
    return roots


def stats(store: EventStore) -> LogStats:
    """Where the log stands and what it holds, counted over the whole log."""
    status = store.log_status()
    categories: Counter[str] = Counter()
    types: Counter[str] = Counter()
    first = last = None
    for event in store.read_all():
        categories[event.category] += 1
        types[event.type] += 1
        first = first or event.recorded_at
        last = event.recorded_at
    return LogStats(
        head=status.head,
        high_water_mark=status.high_water_mark,
        events=sum(categories.values()),
        by_category=dict(sorted(categories.items())),
        by_type=dict(sorted(types.items())),
        first_recorded_at=first,
        last_recorded_at=last,
        replica=status.replica,
    )
