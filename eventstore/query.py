"""Queries of the log by event types and tags, and the condition an append may carry.

The contract is that of Dynamic Consistency Boundaries (dcb.events): a query
is an OR of items; an event matches an item when its type is one of the
item's types (any type if the item names none) and its tags include all of
the item's tags. The empty query matches every event. A conditional append
fails, writing nothing, when an event matching its query was stored after
the position it names: the position up to which the decision read.

Every backend decides matches by the same rule; `QueryItem.matches` is the
rule in Python (memory, tests), `postgres/tag_functions.py` (PostgreSQL) and `sqlite/query.py`
write it in SQL.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from .encoding import MAX_AFTER, check_name, check_position, check_tags
from .errors import InvalidEvent
from .events import RecordedEvent


def _check_types(where: str, types: object) -> tuple[str, ...]:
    if isinstance(types, str | bytes) or not isinstance(types, Iterable):
        raise InvalidEvent(
            f"{where}: types must be a list or set of str, not {type(types).__name__}: "
            f"{types!r:.80}"
        )
    return tuple(sorted({check_name(f"{where}: an event type", name) for name in types}))


@dataclass(frozen=True, slots=True, init=False)
class QueryItem:
    """Events of any of `types` (any type if none) that carry all of `tags`.

    Example::

        from eventcraft.eventstore import QueryItem

        seats = QueryItem(types=["SeatBooked", "SeatReleased"], tags=["course:c1"])
        assert seats.matches("SeatBooked", ["course:c1", "student:s7"])  # all of its tags
        assert not seats.matches("SeatBooked", ["course:c2"])
        assert not seats.matches("CourseRenamed", ["course:c1"])  # any of its types
        assert QueryItem(tags=["student:s7"]).matches("Anything", ["student:s7"])
    """

    types: tuple[str, ...]
    tags: tuple[str, ...]

    def __init__(self, types: Iterable[str] = (), tags: Iterable[str] = ()) -> None:
        object.__setattr__(self, "types", _check_types("query item", types))
        object.__setattr__(self, "tags", check_tags("query item", tags))

    def matches(self, type: str, tags: Iterable[str]) -> bool:
        if self.types and type not in self.types:
            return False
        return not self.tags or set(self.tags).issubset(tags)

    def __repr__(self) -> str:
        return f"QueryItem(types={list(self.types)!r}, tags={list(self.tags)!r})"


@dataclass(frozen=True, slots=True, init=False)
class Query:
    """An OR of `QueryItem`s; `Query()` (no items) matches every event.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent, Query, QueryItem

        # What deciding on a booking of course c1 by student s7 needs: the course, and
        # what s7 booked already.
        query = Query(
            [
                QueryItem(types=["CourseDefined"], tags=["course:c1"]),
                QueryItem(types=["SeatBooked"], tags=["student:s7"]),
            ]
        )
        with EventStore.open("sqlite:///shop.db") as store:
            store.append("course-c1", [NewEvent("CourseDefined", {}, tags=["course:c1"])])
            for booking, student in (("booking-1", "s7"), ("booking-2", "s8")):
                seat = NewEvent("SeatBooked", {}, tags=["course:c2", f"student:{student}"])
                store.append(booking, [seat])
            found = store.read_query(query)
        assert [e.stream_id for e in found.events] == ["course-c1", "booking-1"]
    """

    items: tuple[QueryItem, ...]

    def __init__(self, items: Iterable[QueryItem] = ()) -> None:
        if isinstance(items, QueryItem):
            items = (items,)
        if not isinstance(items, Iterable):
            raise InvalidEvent(
                f"a Query takes a list of QueryItem, not {type(items).__name__}: {items!r:.80}"
            )
        given = tuple(items)
        for item in given:
            if not isinstance(item, QueryItem):
                raise InvalidEvent(
                    f"a Query takes a list of QueryItem, found {type(item).__name__}: {item!r:.80}"
                )
        # An item with neither types nor tags matches everything: so does the query.
        if any(not item.types and not item.tags for item in given):
            given = ()
        object.__setattr__(self, "items", tuple(dict.fromkeys(given)))

    @property
    def matches_all(self) -> bool:
        return not self.items

    def matches(self, type: str, tags: Iterable[str]) -> bool:
        if not self.items:
            return True
        held = set(tags)
        return any(item.matches(type, held) for item in self.items)

    def matches_event(self, event: RecordedEvent) -> bool:
        return self.matches(event.type, event.tags)

    def __repr__(self) -> str:
        return f"Query({list(self.items)!r})"


@dataclass(frozen=True, slots=True, init=False)
class AppendCondition:
    """Refuse the append if an event matching `fail_if_events_match` was stored after `after`.

    `after` is the position a decision read up to (`QueryResult.head`); None
    refuses the append if any matching event is stored at all.

    Example::

        from eventcraft.eventstore import AppendCondition, EventStore, NewEvent, Query, QueryItem

        course = Query([QueryItem(tags=["course:c1"])])


        def book(store: EventStore, student: str) -> None:
            seen = store.read_query(course)  # decide on what the course's events say
            booked = sum(e.type == "SeatBooked" for e in seen.events)
            if booked >= 1:
                raise ValueError("course c1 is full")
            booking = NewEvent("SeatBooked", {"student": student}, tags=["course:c1"])
            # Refused if a booking of c1 came after what this decision read.
            condition = AppendCondition(course, after=seen.head)
            store.append(f"booking-{student}", [booking], condition=condition)


        with EventStore.open("sqlite:///shop.db") as store:
            book(store, "s7")
            assert store.stream_version("booking-s7") == 1
    """

    fail_if_events_match: Query
    after: int | None

    def __init__(self, fail_if_events_match: Query, after: int | None = None) -> None:
        if not isinstance(fail_if_events_match, Query):
            raise InvalidEvent(
                "AppendCondition's fail_if_events_match must be a Query, not "
                f"{type(fail_if_events_match).__name__}: {fail_if_events_match!r:.80}"
            )
        if after is not None:
            check_position("AppendCondition's after", after, MAX_AFTER)
        object.__setattr__(self, "fail_if_events_match", fail_if_events_match)
        object.__setattr__(self, "after", after)


class QueryResult(NamedTuple):
    """What `read_query` read: the matching events, and the position the read covered.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent, Query, QueryItem

        with EventStore.open("sqlite:///shop.db") as store:
            store.append("booking-1", [NewEvent("SeatBooked", {}, tags=["course:c1"])])
            store.append("booking-2", [NewEvent("SeatBooked", {}, tags=["course:c2"])])
            result = store.read_query(Query([QueryItem(tags=["course:c1"])]))
            assert [e.stream_id for e in result.events] == ["booking-1"]
            assert result.head == 2  # covered up to here: the `after` of an AppendCondition
    """

    events: list[RecordedEvent]
    """The events matching the query, in position order."""
    head: int
    """Every matching event up to here is in `events`: the `after` of an `AppendCondition`
    for a decision made on them."""


def covered(found: list[RecordedEvent], limit: int | None, head: int, after: int) -> QueryResult:
    """The result of a read by query that found `found` after `after` up to `head`, below
    which no matching event can still be stored: it covered up to its last event when
    `limit` cut it short."""
    if limit is not None and len(found) >= limit:
        return QueryResult(found, found[-1].position if found else after)
    return QueryResult(found, max(head, after))


def checked_query(query: object) -> Query:
    if not isinstance(query, Query):
        raise InvalidEvent(f"a query must be a Query, not {type(query).__name__}: {query!r:.80}")
    return query
