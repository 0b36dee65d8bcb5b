"""Deleting streams, soft and with a tombstone: part of the conformance suite;
`EventStoreConformance` includes it."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime, timedelta, timezone

import pytest

from ..errors import InvalidEvent, StreamTombstoned, WrongExpectedVersion
from ..events import ANY, NO_STREAM, NewEvent
from ..store import EventStore


def _events(*types: str) -> list[NewEvent]:
    return [NewEvent(t, {"t": t}) for t in types]


LARGE = 600
"""Events in a batch PostgreSQL writes in parts, each expecting the one before it."""


class DeletionConformance:
    """`delete_stream`: a deleted stream reads as absent and comes back when appended to,
    its versions going on; a tombstoned one takes no append ever; the log keeps both."""

    def test_a_deleted_stream_reads_as_absent_and_the_log_keeps_it(self, store: EventStore) -> None:
        store.append("order-1", _events("Placed", "Paid"))
        store.append("order-2", _events("Placed"))
        store.save_snapshot("order-1", version=2, type="Order", data={"paid": True})
        log = [(e.stream_id, e.version, e.position) for e in store.read_all()]

        deletion = store.delete_stream("order-1", expected_version=2)

        assert (deletion.stream_id, deletion.version, deletion.tombstone) == ("order-1", 2, False)
        assert store.stream_deletion("order-1") == deletion
        assert store.stream_deletion("order-2") is None
        assert list(store.read_stream("order-1")) == []
        assert list(store.read_stream("order-1", backwards=True)) == []
        assert list(store.read_stream_encoded("order-1")) == []
        assert store.stream_version("order-1") == 0
        assert store.load_snapshot("order-1") is None
        assert [(i.stream_id, i.version) for i in store.list_streams()] == [("order-2", 1)]
        assert [e.stream_id for e in store.read_stream("order-2")] == ["order-2"]
        assert [(e.stream_id, e.version, e.position) for e in store.read_all()] == log

    def test_placed_deletions_list_each_deletion_at_its_event_in_position_order(
        self, store: EventStore
    ) -> None:
        store.append("order-1", _events("Placed", "Paid"))
        store.append("order-2", _events("Placed"))
        store.append("order-3", _events("Placed"))
        store.append("order-4", _events("Placed"))
        positions = {(e.stream_id, e.version): e.position for e in store.read_all()}
        second = store.delete_stream("order-2", tombstone=True)
        first = store.delete_stream("order-1", expected_version=2)
        store.delete_stream("order-3")
        store.append("order-3", _events("Placed"))  # back, its deletion still placed at v1
        never = store.delete_stream("order-9", tombstone=True)  # before every event
        store.delete_stream("order-8")

        placed = store.placed_deletions()

        assert [(p, d.stream_id, d.version, d.tombstone) for p, d in placed] == [
            (0, "order-8", 0, False),
            (0, "order-9", 0, True),
            (positions["order-1", 2], "order-1", 2, False),
            (positions["order-2", 1], "order-2", 1, True),
            (positions["order-3", 1], "order-3", 1, False),
        ]
        assert placed[1][1] == never and placed[2][1] == first and placed[3][1] == second
        after, until = positions["order-1", 2], positions["order-3", 1] - 1
        assert [d.stream_id for _, d in store.placed_deletions(after, until)] == ["order-2"]
        assert store.placed_deletions(positions["order-4", 1]) == []
        assert store.placed_deletions(0, 0) == placed[:2]
        assert store.placed_deletions(1) == placed[2:]
        assert store.placed_deletions(categories="order") == placed
        assert store.placed_deletions(categories=["cart"]) == []
        with pytest.raises(InvalidEvent, match="after must be an int"):
            store.placed_deletions(-1)

    def test_an_append_brings_a_deleted_stream_back_its_versions_going_on(
        self, store: EventStore
    ) -> None:
        store.append("order-1", _events("Placed", "Paid"))
        store.delete_stream("order-1")
        result = store.append("order-1", _events("Placed"), expected_version=NO_STREAM)
        assert result.version == 3
        assert store.append("order-1", _events("Shipped"), expected_version=3).version == 4
        assert [e.version for e in store.read_stream("order-1")] == [3, 4]
        assert [e.version for e in store.read_stream("order-1", backwards=True)] == [4, 3]
        assert [e.version for e in store.read_stream("order-1", from_version=1)] == [3, 4]
        assert store.stream_version("order-1") == 4
        assert [(i.stream_id, i.version) for i in store.list_streams()] == [("order-1", 4)]
        assert [e.version for e in store.read_all() if e.stream_id == "order-1"] == [1, 2, 3, 4]

    def test_a_deleted_stream_comes_back_at_any_and_with_a_large_batch(
        self, store: EventStore
    ) -> None:
        store.append("cart-1", _events("Added"))
        store.append("cart-2", _events("Added"))
        store.delete_stream("cart-1")
        store.delete_stream("cart-2")
        assert store.append("cart-1", _events("Added")).version == 2
        many = [NewEvent("Added", {"n": n}) for n in range(LARGE)]
        assert store.append("cart-2", many, expected_version=NO_STREAM).version == LARGE + 1
        assert store.stream_version("cart-2") == LARGE + 1
        assert [e.data["n"] for e in store.read_stream("cart-2")] == list(range(LARGE))

    def test_an_append_decided_on_the_deleted_stream_is_refused(self, store: EventStore) -> None:
        store.append("order-1", _events("Placed", "Paid"))
        store.delete_stream("order-1")
        head = store.high_water_mark()
        for expected in (2, 1, 5):
            with pytest.raises(WrongExpectedVersion) as raised:
                store.append("order-1", _events("Shipped"), expected_version=expected)
            assert raised.value.actual == 0
        store.append("order-1", _events("Placed"), expected_version=NO_STREAM)
        with pytest.raises(WrongExpectedVersion) as again:
            store.append("order-1", _events("Placed"), expected_version=NO_STREAM)
        assert again.value.actual == 3
        assert store.high_water_mark() == head + 1

    def test_a_deletion_at_the_wrong_version_deletes_nothing(self, store: EventStore) -> None:
        store.append("order-1", _events("Placed", "Paid"))
        with pytest.raises(WrongExpectedVersion) as raised:
            store.delete_stream("order-1", expected_version=1)
        assert (raised.value.stream_id, raised.value.actual) == ("order-1", 2)
        with pytest.raises(WrongExpectedVersion):
            store.delete_stream("order-1", expected_version=NO_STREAM, tombstone=True)
        assert store.stream_deletion("order-1") is None
        assert store.stream_version("order-1") == 2
        store.delete_stream("order-1", expected_version=2)
        with pytest.raises(WrongExpectedVersion) as twice:
            store.delete_stream("order-1", expected_version=2)
        assert twice.value.actual == 0
        assert store.delete_stream("order-1").version == 2  # at ANY, again: nothing new

    def test_a_tombstoned_stream_takes_no_append_ever(self, store: EventStore) -> None:
        stored = _events("Placed")
        store.append("order-1", stored)
        deletion = store.delete_stream("order-1", expected_version=1, tombstone=True)
        assert deletion.tombstone and deletion.version == 1
        head = store.high_water_mark()
        many = [NewEvent("Added", {"n": n}) for n in range(LARGE)]
        attempts: list[Callable[[], object]] = [
            lambda: store.append("order-1", _events("Paid")),
            lambda: store.append("order-1", _events("Paid"), expected_version=NO_STREAM),
            lambda: store.append("order-1", _events("Paid"), expected_version=1),
            lambda: store.append("order-1", many),
            lambda: store.append("order-1", stored),  # a retry of what was stored before
            lambda: store.append_many(
                [("order-2", _events("Placed"), ANY), ("order-1", _events("Paid"), ANY)]
            ),
            lambda: store.delete_stream("order-1"),
            lambda: store.delete_stream("order-1", tombstone=True),
        ]
        for attempt in attempts:
            with pytest.raises(StreamTombstoned) as raised:
                attempt()
            assert raised.value.stream_id == "order-1"
            assert "order-1" in str(raised.value)
        assert store.high_water_mark() == head
        assert store.stream_version("order-2") == 0
        assert list(store.read_stream("order-1")) == []
        assert store.stream_deletion("order-1") == deletion

    def test_a_deletion_keeps_the_time_it_is_given(self, store: EventStore) -> None:
        """An import's: the copy keeps when the original deleted the stream."""
        store.append("order-1", _events("Placed"))
        store.append("order-2", _events("Placed"))
        then = datetime(2024, 5, 1, 12, 30, 0, 123456, tzinfo=timezone(timedelta(hours=2)))

        given = store.delete_stream("order-1", expected_version=1, deleted_at=then)
        now = store.delete_stream("order-2", tombstone=True)

        assert given.deleted_at == then and given.deleted_at.utcoffset() == timedelta(0)
        assert store.stream_deletion("order-1") == given
        assert [d.deleted_at for _, d in store.placed_deletions()] == [then, now.deleted_at]
        assert now.deleted_at > then and now.deleted_at.utcoffset() == timedelta(0)
        later = then + timedelta(days=1)
        tombstone = store.delete_stream("order-1", tombstone=True, deleted_at=later)
        assert (tombstone.tombstone, tombstone.deleted_at) == (True, later)
        assert store.stream_deletion("order-1") == tombstone

    def test_a_stream_never_written_can_be_tombstoned(self, store: EventStore) -> None:
        deletion = store.delete_stream("order-9", expected_version=NO_STREAM, tombstone=True)
        assert (deletion.version, deletion.tombstone) == (0, True)
        with pytest.raises(StreamTombstoned):
            store.append("order-9", _events("Placed"), expected_version=NO_STREAM)
        assert list(store.list_streams()) == []
        assert store.high_water_mark() == 0

    def test_concurrent_appends_to_a_tombstoned_stream_fail_alone(self, store: EventStore) -> None:
        """Threads appending at once, the backends grouping them into shared commits: the
        appends to the tombstoned stream are refused, each of the others is written."""
        store.delete_stream("closed-1", tombstone=True)
        threads, rounds = 6, 10
        start = threading.Barrier(threads)
        outcomes: dict[int, list[object]] = defaultdict(list)

        def work(n: int) -> None:
            start.wait()
            for round_ in range(rounds):
                stream = "closed-1" if (n + round_) % 3 == 0 else f"open-{n}"
                try:
                    outcomes[n].append(store.append(stream, _events(f"R{round_}")))
                except StreamTombstoned as error:
                    outcomes[n].append(error.stream_id)

        workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        log = list(store.read_all())
        assert all(e.stream_id != "closed-1" for e in log)
        for n in range(threads):
            refused = [o for o in outcomes[n] if o == "closed-1"]
            assert len(refused) == len([r for r in range(rounds) if (n + r) % 3 == 0])
            own = [e.type for e in log if e.stream_id == f"open-{n}"]
            assert own == [f"R{r}" for r in range(rounds) if (n + r) % 3 != 0]

    def test_bad_deletions_are_refused(self, store: EventStore) -> None:
        store.append("order-1", _events("Placed"))
        calls: list[Callable[[], object]] = [
            lambda: store.delete_stream("", expected_version=ANY),
            lambda: store.delete_stream("order-1", expected_version=-2),
            lambda: store.delete_stream("order-1", tombstone="yes"),  # type: ignore[arg-type]
            lambda: store.delete_stream("order-1", deleted_at=datetime(2024, 5, 1)),  # naive
            lambda: store.delete_stream("order-1", deleted_at="2024-05-01"),  # type: ignore[arg-type]
        ]
        for call in calls:
            with pytest.raises(InvalidEvent):
                call()
        assert store.stream_deletion("order-1") is None
        assert store.stream_version("order-1") == 1
