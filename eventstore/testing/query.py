"""Tags, queries and conditional appends: part of the conformance suite;
`EventStoreConformance` includes it."""

from __future__ import annotations

import threading

import pytest

from ..errors import AppendConditionFailed, InvalidEvent, WrongExpectedVersion
from ..events import ANY, NO_STREAM, NewEvent
from ..query import AppendCondition, Query, QueryItem
from ..store import EventStore


def _tagged(type: str, *tags: str, **data: object) -> NewEvent:
    return NewEvent(type, dict(data), tags=tags)


def _courses(store: EventStore) -> None:
    """Positions 1-6: a course defined, two subscriptions to it, one to another course, an
    untagged event, a subscription to both courses."""
    store.append("course-c1", [_tagged("CourseDefined", "course:c1", capacity=2)])
    store.append("student-s1", [_tagged("Subscribed", "course:c1", "student:s1")])
    store.append("student-s2", [_tagged("Subscribed", "course:c1", "student:s2")])
    store.append("student-s1", [_tagged("Subscribed", "course:c2", "student:s1")])
    store.append("audit-1", [NewEvent("Audited", {})])
    store.append("student-s3", [_tagged("Subscribed", "course:c1", "course:c2", "student:s3")])


def _positions(store: EventStore, query: Query, after: int = 0) -> list[int]:
    return [event.position for event in store.read_query(query, after=after).events]


class QueryConformance:
    """Events carry tags; `read_query` selects by types and tags; an append may carry an
    `AppendCondition` on such a query."""

    # --- tags -----------------------------------------------------------------

    def test_tags_are_read_back_sorted_each_once(self, store: EventStore) -> None:
        store.append("s-1", [NewEvent("A", {}, tags=["b:2", "a:1", "b:2"]), NewEvent("B", {})])
        first, second = store.read_stream("s-1")
        assert (first.tags, second.tags) == (("a:1", "b:2"), ())
        assert [e.tags for e in store.read_all()] == [("a:1", "b:2"), ()]
        assert store.read_event(first.id) == first
        assert store.read_query(Query()).events == [first, second]

    @pytest.mark.parametrize(
        ("tags", "wrong"),
        [
            ("course:c1", "must be a list or set of str"),
            (["ok", ""], "must not be empty"),
            (["line\nbreak"], "control characters"),
            (["x" * 256], "characters long"),
            ([7], "must be a str"),
            ([f"t{n}" for n in range(101)], "the limit is 100"),
        ],
    )
    def test_bad_tags_are_refused_and_nothing_is_written(
        self, store: EventStore, tags: object, wrong: str
    ) -> None:
        bad = NewEvent("A", {}, tags=tags)  # type: ignore[arg-type]
        with pytest.raises(InvalidEvent, match=wrong):
            store.append("s-1", [NewEvent("A", {}, tags=["fine"]), bad])
        assert store.high_water_mark() == 0

    # --- queries --------------------------------------------------------------

    def test_an_item_matches_any_of_its_types_and_all_of_its_tags(self, store: EventStore) -> None:
        _courses(store)
        assert _positions(store, Query([QueryItem(tags=["course:c1"])])) == [1, 2, 3, 6]
        assert _positions(store, Query([QueryItem(types=["Subscribed"])])) == [2, 3, 4, 6]
        both = Query([QueryItem(types=["Subscribed"], tags=["course:c1", "student:s1"])])
        assert _positions(store, both) == [2]
        assert _positions(store, Query([QueryItem(tags=["course:c1", "course:c2"])])) == [6]
        either = Query([QueryItem(types=["Audited"]), QueryItem(tags=["student:s1"])])
        assert _positions(store, either) == [2, 4, 5]
        kinds = Query([QueryItem(types=["Audited", "CourseDefined"])])
        assert _positions(store, kinds) == [1, 5]
        assert _positions(store, Query([QueryItem(tags=["course:c9"])])) == []
        assert _positions(store, Query([QueryItem(types=["Nothing"])])) == []

    def test_the_empty_query_matches_every_event(self, store: EventStore) -> None:
        _courses(store)
        assert _positions(store, Query()) == [1, 2, 3, 4, 5, 6]
        assert _positions(store, Query([QueryItem()])) == [1, 2, 3, 4, 5, 6]

    def test_an_event_matching_two_items_is_read_once(self, store: EventStore) -> None:
        _courses(store)
        query = Query([QueryItem(tags=["course:c1"]), QueryItem(tags=["student:s3"])])
        assert _positions(store, query) == [1, 2, 3, 6]

    def test_the_head_is_where_the_read_stopped(self, store: EventStore) -> None:
        _courses(store)
        query = Query([QueryItem(tags=["course:c2"])])
        everything = store.read_query(query)
        assert [e.position for e in everything.events] == [4, 6]
        assert everything.head == store.high_water_mark() == 6
        limited = store.read_query(query, limit=1)
        assert ([e.position for e in limited.events], limited.head) == ([4], 4)
        rest = store.read_query(query, after=limited.head)
        assert ([e.position for e in rest.events], rest.head) == ([6], 6)
        none = store.read_query(Query([QueryItem(tags=["course:c9"])]), after=2)
        assert (none.events, none.head) == ([], 6)

    def test_a_query_reads_the_events_as_every_read_does(self, store: EventStore) -> None:
        _courses(store)
        by_query = store.read_query(Query([QueryItem(tags=["student:s1"])])).events
        assert by_query == [e for e in store.read_all() if "student:s1" in e.tags]

    @pytest.mark.parametrize(
        ("make", "wrong"),
        [
            (lambda: QueryItem(types="Subscribed"), "must be a list or set of str"),
            (lambda: QueryItem(tags="course:c1"), "must be a list or set of str"),
            (lambda: QueryItem(tags=["bad\ttag"]), "control characters"),
            (lambda: Query(["course:c1"]), "takes a list of QueryItem"),  # type: ignore[list-item]
            (lambda: AppendCondition("x"), "must be a Query"),  # type: ignore[arg-type]
            (lambda: AppendCondition(Query(), after=-1), "after must be an int"),
        ],
    )
    def test_bad_queries_and_conditions_say_what_is_wrong(self, make: object, wrong: str) -> None:
        with pytest.raises(InvalidEvent, match=wrong):
            make()  # type: ignore[operator]

    def test_read_query_checks_its_arguments(self, store: EventStore) -> None:
        with pytest.raises(InvalidEvent, match="must be a Query"):
            store.read_query([QueryItem(tags=["a"])])  # type: ignore[arg-type]
        with pytest.raises(InvalidEvent, match="after must be"):
            store.read_query(Query(), after=-1)
        with pytest.raises(InvalidEvent, match="limit must be"):
            store.read_query(Query(), limit=-1)

    # --- conditional appends --------------------------------------------------

    def test_a_decision_appends_when_nothing_matching_came_after_its_read(
        self, store: EventStore
    ) -> None:
        _courses(store)
        query = Query([QueryItem(types=["Subscribed"], tags=["course:c2"])])
        read = store.read_query(query)
        store.append("audit-1", [NewEvent("Audited", {})])  # matches no item
        store.append("student-s9", [_tagged("Subscribed", "course:c1", "student:s9")])
        result = store.append(
            "student-s4",
            [_tagged("Subscribed", "course:c2", "student:s4")],
            condition=AppendCondition(query, after=read.head),
        )
        assert result.positions == (9,)

    def test_a_matching_event_after_the_read_refuses_the_append(self, store: EventStore) -> None:
        _courses(store)
        query = Query([QueryItem(types=["Subscribed"], tags=["course:c2"])])
        read = store.read_query(query)
        store.append("student-s5", [_tagged("Subscribed", "course:c2", "student:s5")])
        with pytest.raises(AppendConditionFailed) as refused:
            store.append(
                "student-s4",
                [_tagged("Subscribed", "course:c2", "student:s4")],
                condition=AppendCondition(query, after=read.head),
            )
        failed = refused.value
        assert (failed.stream_id, failed.query, failed.after, failed.position) == (
            "student-s4",
            query,
            6,
            7,
        )
        assert store.high_water_mark() == 7
        assert store.stream_version("student-s4") == 0

    def test_without_after_any_matching_event_refuses(self, store: EventStore) -> None:
        store.append("user-1", [_tagged("Registered", "username:alice")])
        taken = AppendCondition(Query([QueryItem(tags=["username:alice"])]))
        with pytest.raises(AppendConditionFailed) as refused:
            store.append("user-2", [_tagged("Registered", "username:alice")], condition=taken)
        assert refused.value.position == 1
        free = AppendCondition(Query([QueryItem(tags=["username:bob"])]))
        store.append("user-2", [_tagged("Registered", "username:bob")], condition=free)

    def test_the_empty_query_refuses_after_any_event(self, store: EventStore) -> None:
        store.append("a-1", [NewEvent("A", {})])
        with pytest.raises(AppendConditionFailed):
            store.append("b-1", [NewEvent("B", {})], condition=AppendCondition(Query(), after=0))
        store.append("b-1", [NewEvent("B", {})], condition=AppendCondition(Query(), after=1))

    def test_a_version_and_a_condition_are_both_checked(self, store: EventStore) -> None:
        store.append("course-c1", [_tagged("CourseDefined", "course:c1")])
        query = Query([QueryItem(tags=["course:c1"])])
        with pytest.raises(WrongExpectedVersion):
            store.append(
                "course-c1",
                [_tagged("CourseRenamed", "course:c1")],
                expected_version=5,
                condition=AppendCondition(query, after=1),
            )
        with pytest.raises(AppendConditionFailed):
            store.append(
                "course-c1",
                [_tagged("CourseRenamed", "course:c1")],
                expected_version=1,
                condition=AppendCondition(query, after=0),
            )
        store.append(
            "course-c1",
            [_tagged("CourseRenamed", "course:c1")],
            expected_version=1,
            condition=AppendCondition(query, after=1),
        )
        assert store.stream_version("course-c1") == 2

    def test_a_retried_conditional_append_returns_its_first_result(self, store: EventStore) -> None:
        query = Query([QueryItem(tags=["username:alice"])])
        sent = [_tagged("Registered", "username:alice", id=1)]
        first = store.append("user-1", sent, NO_STREAM, condition=AppendCondition(query))
        store.append("other-1", [NewEvent("Noise", {})])
        # The first attempt's own event now matches the query: still a retry.
        again = store.append("user-1", sent, NO_STREAM, condition=AppendCondition(query))
        assert again == first
        assert store.high_water_mark() == 2

    def test_a_condition_passes_over_events_at_or_before_its_position(
        self, store: EventStore
    ) -> None:
        store.append("course-c1", [_tagged("CourseDefined", "course:c1")])
        store.append("course-c1", [_tagged("CourseDefined", "course:c1")])
        condition = AppendCondition(Query([QueryItem(tags=["course:c1"])]), after=2)
        store.append("course-c1", [_tagged("Renamed", "course:c1")], condition=condition)

    def test_append_many_checks_each_condition_against_the_store_before_the_call(
        self, store: EventStore
    ) -> None:
        store.append("course-c1", [_tagged("CourseDefined", "course:c1")])
        seats = Query([QueryItem(tags=["course:c1"])])
        # Each item's condition reads the store as it was: the other item's event,
        # written by the same call, does not refuse it.
        results = store.append_many(
            [
                ("student-s1", [_tagged("Subscribed", "course:c1")], NO_STREAM,
                 AppendCondition(seats, after=1)),
                ("student-s2", [_tagged("Subscribed", "course:c1")], NO_STREAM,
                 AppendCondition(seats, after=1)),
            ]
        )  # fmt: skip
        assert [r.positions for r in results] == [(2,), (3,)]
        with pytest.raises(AppendConditionFailed) as refused:
            store.append_many(
                [
                    ("student-s3", [_tagged("Subscribed", "course:c1")], NO_STREAM),
                    ("student-s4", [_tagged("Subscribed", "course:c1")], NO_STREAM,
                     AppendCondition(seats, after=2)),
                ]
            )  # fmt: skip
        assert (refused.value.stream_id, refused.value.position) == ("student-s4", 3)
        assert store.high_water_mark() == 3

    def test_append_many_refuses_a_condition_that_is_not_one(self, store: EventStore) -> None:
        with pytest.raises(InvalidEvent, match="must be an AppendCondition"):
            store.append_many([("a-1", [NewEvent("A", {})], ANY, "no")])  # type: ignore[list-item]
        assert store.high_water_mark() == 0

    # --- concurrency ----------------------------------------------------------

    def test_of_racing_decisions_on_one_tag_exactly_one_wins(self, store: EventStore) -> None:
        """Eight threads register the same user name at once, each reading first: the
        store lets one through, whether their appends share a commit or not."""
        query = Query([QueryItem(types=["Registered"], tags=["username:alice"])])
        barrier = threading.Barrier(8)
        outcomes: list[str] = []

        def register(n: int) -> None:
            read = store.read_query(query)
            barrier.wait()
            try:
                store.append(
                    f"user-{n}",
                    [_tagged("Registered", "username:alice", n=n)],
                    condition=AppendCondition(query, after=read.head),
                )
                outcomes.append("won")
            except AppendConditionFailed:
                outcomes.append("refused")

        threads = [threading.Thread(target=register, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(outcomes) == ["refused"] * 7 + ["won"]
        assert len(store.read_query(query).events) == 1

    def test_decisions_on_disjoint_tags_never_refuse_each_other(self, store: EventStore) -> None:
        """Eight threads decide on a tag each, five times: no append is refused by
        another thread's event. (A refusal by the thread's own last event is possible
        where the log's readable end lags a commit of its own while other appends are
        in flight: it reads again and decides again.)"""
        barrier = threading.Barrier(8)
        failures: list[BaseException] = []
        strangers: list[int] = []

        def register(n: int) -> None:
            tag = f"username:u{n}"
            query = Query([QueryItem(tags=[tag])])
            barrier.wait()
            try:
                for round_ in range(5):
                    while True:
                        read = store.read_query(query)
                        try:
                            store.append(
                                f"user-{n}",
                                [_tagged("Renamed", tag, r=round_)],
                                condition=AppendCondition(query, after=read.head),
                            )
                            break
                        except AppendConditionFailed as refused:
                            # Readable once no append in flight can fill a gap below it.
                            store.wait_for_events(refused.position - 1, timeout=30)
                            event = next(store.read_all(after=refused.position - 1, limit=1))
                            if tag not in event.tags:
                                strangers.append(refused.position)
                                return
            except BaseException as error:
                failures.append(error)

        threads = [threading.Thread(target=register, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert (failures, strangers) == ([], [])
        assert store.high_water_mark() == 40
