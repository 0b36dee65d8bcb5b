"""The imported-time part of the conformance suite; `EventStoreConformance` includes it.

An import copies events with the time they were first recorded: a `NewEvent`
with a `recorded_at` keeps it; one without gets the time of its append.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from ..errors import InvalidEvent
from ..events import NewEvent
from ..store import EventStore

_THEN = datetime(2021, 3, 4, 5, 6, 7, 891011, tzinfo=UTC)


class ImportConformance:
    """`NewEvent.recorded_at`: a given time is kept, to the microsecond, as UTC."""

    def test_an_event_given_a_time_keeps_it(self, store: EventStore) -> None:
        event = NewEvent("Placed", {"n": 1}, recorded_at=_THEN)
        store.append("order-1", [event])
        found = [*store.read_all(), *store.read_stream("order-1"), store.read_event(event.id)]
        assert [e.recorded_at for e in found if e is not None] == [_THEN] * 3
        assert all(e.recorded_at.utcoffset() == timedelta(0) for e in found if e is not None)

    def test_a_time_in_another_zone_is_kept_as_the_same_instant_in_utc(
        self, store: EventStore
    ) -> None:
        given = datetime(2021, 3, 4, 7, 6, 7, 5, tzinfo=timezone(timedelta(hours=2)))
        store.append("order-1", [NewEvent("Placed", {}, recorded_at=given)])
        (found,) = store.read_all()
        assert found.recorded_at == given
        assert found.recorded_at.utcoffset() == timedelta(0)

    def test_events_without_a_time_get_the_appends_beside_those_with_one(
        self, store: EventStore
    ) -> None:
        before = datetime.now(UTC) - timedelta(seconds=5)  # the database's clock may lag a bit
        store.append(
            "order-1",
            [
                NewEvent("Placed", {}, recorded_at=_THEN),
                NewEvent("Paid", {}),
                NewEvent("Sent", {}, recorded_at=_THEN + timedelta(days=1)),
            ],
        )
        times = [e.recorded_at for e in store.read_stream("order-1")]
        assert times[0] == _THEN
        assert times[1] >= before
        assert times[2] == _THEN + timedelta(days=1)

    def test_a_large_batch_keeps_every_given_time(self, store: EventStore) -> None:
        # PostgreSQL sends a batch this large in several parts.
        times = [_THEN + timedelta(microseconds=n) for n in range(600)]
        store.append(
            "order-1", [NewEvent("Tick", {"n": n}, recorded_at=t) for n, t in enumerate(times)]
        )
        assert [e.recorded_at for e in store.read_all()] == times

    def test_a_retried_append_with_times_writes_nothing(self, store: EventStore) -> None:
        events = [
            NewEvent("Placed", {}, recorded_at=_THEN),
            NewEvent("Paid", {}, recorded_at=_THEN),
        ]
        first = store.append("order-1", events, expected_version=0)
        assert store.append("order-1", events, expected_version=0) == first
        assert [e.recorded_at for e in store.read_all()] == [_THEN, _THEN]

    @pytest.mark.parametrize(
        "given", [datetime(2021, 3, 4), "2021-03-04T05:06:07+00:00", 1614834367], ids=str
    )
    def test_a_time_that_is_not_an_aware_datetime_is_refused(
        self, store: EventStore, given: object
    ) -> None:
        with pytest.raises(InvalidEvent, match="recorded_at"):
            store.append("order-1", [NewEvent("Placed", {}, recorded_at=given)])  # type: ignore[arg-type]
        assert store.stream_version("order-1") == 0
