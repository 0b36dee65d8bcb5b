"""Reading what a definition subscribes to by a query of types and tags.

A definition with a `query` reads the store with `read_query`, the query
narrowed to the definition's own types (a projection's handlers), its
categories checked on the events read. `read_query` tells how far its
read covered (`QueryResult.head`): every matching event up to there is in
hand, so the checkpoint may move there, past the events the query does not
select, and never past one it does.

Filtering `read_all` in Python instead would read every event of the log
(or of the definition's types); the query walks the store's tag index, so
a selective query reads only its own events (figures in docs/benchmarks).
"""

from __future__ import annotations

from eventcraft.eventstore import EventStore, Query, QueryItem, RecordedEvent

from .definition import Definition


def narrowed(query: Query, types: tuple[str, ...] | None) -> Query | None:
    """The events of `query` that are also of `types` (None: any type), as one query;
    None when no event can be both.

    Example::

        from eventcraft.eventstore import Query, QueryItem
        from eventcraft.projections import narrowed

        course = Query([QueryItem(tags=["course:c1"])])  # a definition's `query=`
        enrolments = narrowed(course, ("StudentEnrolled", "StudentLeft"))  # and its handlers' types
        both = QueryItem(types=["StudentEnrolled", "StudentLeft"], tags=["course:c1"])
        assert enrolments == Query([both])
        fees = Query([QueryItem(types=["FeePaid"], tags=["course:c1"])])
        assert narrowed(fees, ("StudentEnrolled",)) is None  # no event can be both
    """
    if types is None:
        return query
    if query.matches_all:
        return Query([QueryItem(types=types)])
    wanted = set(types)
    items = []
    for item in query.items:
        kept = [t for t in item.types if t in wanted] if item.types else list(types)
        if kept:
            items.append(QueryItem(types=kept, tags=item.tags))
    return Query(items) if items else None


def read_by_query(
    store: EventStore, definition: Definition, query: Query, after: int, limit: int
) -> tuple[list[RecordedEvent], int]:
    """The definition's next events after `after` matching `query`, and the position the
    read covered: where the checkpoint may go."""
    selected = narrowed(query, definition.types)
    if selected is None:
        return [], max(store.high_water_mark(), after)
    found = store.read_query(selected, after=after, limit=limit)
    events = found.events
    if definition.categories is not None:
        categories = definition.categories
        events = [event for event in events if event.category in categories]
    return events, found.head
