"""One poll of the Log page's live tail reads at most `TAIL_READ` events of the log, and
says how far it read (the `Eventcraft-Read-To` header), where the page's next poll starts:
a correlation or time filter that matches nothing no longer reads to the head at once."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from eventcraft.eventstore import EventStore, NewEvent

from eventcraft.console.paging import TAIL_READ
from eventcraft.operations import log
from eventcraft.operations.log import LogFilter

from .conftest import Client

BEYOND = 500
"""Events past one poll's reach."""

NOTHING = {
    "correlation": "correlation=nobody",
    "time": "until=2000-01-01T00:00",
}
"""Filters the store does not apply itself, that match none of the log."""

LONG_AGO = datetime(1999, 1, 1, tzinfo=UTC)
"""When the event both filters take was recorded (as an import keeps an event's time)."""


def _positions(html: str) -> list[int]:
    return [int(p) for p in re.findall(r'<tr data-position="(\d+)"', html)]


def _nth_after(store: EventStore, after: int) -> int:
    """The position of the `TAIL_READ`-th event after `after`, or the head if fewer are."""
    read = list(store.read_all(after=after, limit=TAIL_READ))
    return read[-1].position if len(read) == TAIL_READ else store.high_water_mark()


@pytest.mark.parametrize("nothing", NOTHING)
def test_a_live_tail_that_matches_nothing_reads_a_bounded_stretch_a_poll_to_the_head(
    nothing: str, client: Client, shop_store: EventStore
) -> None:
    shop_store.append("click-1", [NewEvent("Clicked", {"n": n}) for n in range(TAIL_READ + BEYOND)])
    head = shop_store.high_water_mark()
    console = client()
    after, polls = 0, 0
    while after < head:
        tail = console.get(f"/log/tail?after={after}&{NOTHING[nothing]}")
        assert tail.status_code == 200 and _positions(tail.text) == []
        read_to = int(tail.headers["eventcraft-read-to"])
        assert read_to == _nth_after(shop_store, after)
        after, polls = read_to, polls + 1
    assert polls == 2  # the shop's events and the clicks: one poll's reach and a little
    # An event the filter takes, appended later, is on the next poll.
    taken = NewEvent("Clicked", {}, metadata={"correlation_id": "nobody"}, recorded_at=LONG_AGO)
    [position] = shop_store.append("click-2", [taken]).positions
    tail = console.get(f"/log/tail?after={after}&{NOTHING[nothing]}")
    assert _positions(tail.text) == [position]
    assert int(tail.headers["eventcraft-read-to"]) == position


def test_a_tail_stops_at_the_events_it_shows_and_says_how_far_it_read(
    shop_store: EventStore,
) -> None:
    shop_store.append("click-1", [NewEvent("Clicked", {"n": n}) for n in range(30)])
    where = LogFilter(types=("Clicked",))
    first = log.tail(shop_store, after=0, limit=20, scan=TAIL_READ, where=where)
    assert [e.data["n"] for e in first.events] == list(range(20))
    assert first.read_to == first.events[-1].position
    rest = log.tail(shop_store, after=first.read_to, limit=20, scan=TAIL_READ, where=where)
    assert [e.data["n"] for e in rest.events] == list(range(20, 30))
    assert rest.read_to == shop_store.high_water_mark()
