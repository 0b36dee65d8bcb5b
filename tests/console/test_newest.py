"""Reading the log newest first (operations.newest), on every backend: keyset pages that
together are the log reversed, for any filter, however rare its events; a page that stops
on its scan budget says where; counts of the latest events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from eventcraft.eventstore import EventStore, NewEvent

from eventcraft.operations import InputError
from eventcraft.operations.log import LogFilter, log_events
from eventcraft.operations.newest import log_page, recent


def _fill(store: EventStore) -> None:
    """240 events of category `a` in appends of 4, and after every tenth append one event
    of category `rare`, correlated `c-rare`."""
    for n in range(60):
        store.append(f"a-{n}", [NewEvent("Ticked", {"n": n, "k": k}) for k in range(4)])
        if n % 10 == 9:
            store.append(f"rare-{n}", [NewEvent("Seen", {"n": n}, {"correlation_id": "c-rare"})])


def _all_pages(store: EventStore, where: LogFilter, limit: int, budget: int = 100_000) -> list[int]:
    seen: list[int] = []
    before = None
    while True:
        page = log_page(store, before=before, limit=limit, where=where, budget=budget)
        assert len(page.events) <= limit
        seen += [e.position for e in page.events]
        if page.older is None:
            return seen
        assert page.older < (before or 10**9)
        before = page.older


@pytest.mark.parametrize(
    "where",
    [LogFilter(), LogFilter(categories=("rare",)), LogFilter(types=("Ticked",))],
    ids=["all", "rare category", "type"],
)
def test_the_pages_together_are_the_log_reversed(store: EventStore, where: LogFilter) -> None:
    _fill(store)
    forward = [e.position for e in log_events(store, after=0, limit=None, where=where)]
    assert _all_pages(store, where, limit=7) == forward[::-1]


def test_a_page_stopped_by_its_budget_says_where_and_the_next_goes_on(store: EventStore) -> None:
    _fill(store)
    where = LogFilter(correlation_id="c-rare")
    first = log_page(store, limit=10, where=where, budget=20)
    assert first.exhausted and first.older is not None
    assert len(first.events) < 10
    forward = [e.position for e in log_events(store, after=0, limit=None, where=where)]
    assert _all_pages(store, where, limit=10, budget=20) == forward[::-1]
    assert len(forward) == 6


def test_a_time_range_keeps_the_events_recorded_within_it(store: EventStore) -> None:
    _fill(store)
    head = store.high_water_mark()
    assert log_page(store, where=LogFilter(until=datetime(2000, 1, 1, tzinfo=UTC))).events == []
    since = LogFilter(since=datetime.now(UTC) - timedelta(hours=1))
    assert [e.position for e in log_page(store, limit=3, where=since).events] == [
        head,
        head - 1,
        head - 2,
    ]


def test_a_page_refuses_what_cannot_be_a_page(store: EventStore) -> None:
    with pytest.raises(InputError, match="at least one event"):
        log_page(store, limit=0)
    with pytest.raises(InputError, match="before a position from 1"):
        log_page(store, before=0)
    assert log_page(store).events == [] and log_page(store).older is None


def test_recent_counts_the_last_hour_by_minute_and_by_category(store: EventStore) -> None:
    _fill(store)
    now = datetime.now(UTC)
    found = recent(store, now=now)
    assert found.complete and found.counted == 246
    assert found.by_category == {"a": 240, "rare": 6}
    assert sum(found.per_minute) == 246 and sum(found.per_minute[-2:]) > 0
    partial = recent(store, now=now, counted=100)
    assert not partial.complete and partial.counted == 100
    assert sum(partial.by_category.values()) == 100
    later = recent(store, now=now + timedelta(hours=2))
    assert sum(later.per_minute) == 0  # nothing in that hour
