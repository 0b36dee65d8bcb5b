"""Decisions across streams on every backend: one read of the projections' queries, each
event folded into the projections it matches, and an append on the condition of that read,
decided again when it lost its race. The async face is checked to reach the same rules."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
from eventcraft.domain import (
    AsyncDecisions,
    Decision,
    DecisionConflict,
    DecisionProjection,
    Decisions,
    DomainEvent,
    EventRegistry,
    RegistrationError,
    command_context,
)
from eventcraft.eventstore import (
    AppendConditionFailed,
    AppendResult,
    AsyncEventStore,
    EventStore,
    InvalidEvent,
    NewEvent,
    Query,
    QueryItem,
)

from examples.courses import (
    CourseDefined,
    CourseFull,
    Courses,
    StudentRegistered,
    StudentSubscribed,
    StudentUnsubscribed,
    course_capacity,
    course_events,
    course_exists,
    course_subscriptions,
    student_subscriptions,
    subscribed,
)

T = TypeVar("T")


def _school(store: EventStore) -> Courses:
    """Positions 1-6: courses c1 (2 seats) and c2 (5), students s1 and s2, s1 in both."""
    courses = Courses(store)
    courses.define_course("c1", "One", capacity=2)
    courses.define_course("c2", "Two", capacity=5)
    courses.register_student("s1", "ann")
    courses.register_student("s2", "bob")
    courses.subscribe("s1", "c1")
    courses.subscribe("s1", "c2")
    return courses


def _seats(course_id: str) -> dict[str, DecisionProjection[Any]]:
    return {"capacity": course_capacity(course_id), "taken": course_subscriptions(course_id)}


def _subscribe(student_id: str, course_id: str) -> Callable[[Decision], StudentSubscribed]:
    def decide(decision: Decision) -> StudentSubscribed:
        if decision["taken"] >= decision["capacity"]:
            raise CourseFull(course_id)
        return StudentSubscribed(student_id=student_id, course_id=course_id)

    return decide


def test_a_decision_folds_each_event_into_the_projections_it_matches(store: EventStore) -> None:
    _school(store)
    decision = Decisions(store, course_events).read(
        {
            "c1 exists": course_exists("c1"),
            "c3 exists": course_exists("c3"),
            "c1 seats": course_capacity("c1"),
            "c1 taken": course_subscriptions("c1"),
            "s1 courses": student_subscriptions("s1"),
            "s2 courses": student_subscriptions("s2"),
            "s1 in c2": subscribed("s1", "c2"),
        }
    )
    assert dict(decision.states) == {
        "c1 exists": True,
        "c3 exists": False,
        "c1 seats": 2,
        "c1 taken": 1,
        "s1 courses": 2,
        "s2 courses": 0,
        "s1 in c2": True,
    }
    # c1 defined, s1's two subscriptions: each once, though several projections took them.
    assert decision.events == 3
    assert decision.head == store.high_water_mark() == 6
    assert decision.condition.after == 6
    assert decision.query == Query(
        [
            QueryItem(types=["CourseDefined"], tags=["course:c1"]),
            QueryItem(types=["CourseDefined"], tags=["course:c3"]),
            QueryItem(types=["CourseCapacityChanged", "CourseDefined"], tags=["course:c1"]),
            QueryItem(types=["StudentSubscribed", "StudentUnsubscribed"], tags=["course:c1"]),
            QueryItem(types=["StudentSubscribed", "StudentUnsubscribed"], tags=["student:s1"]),
            QueryItem(types=["StudentSubscribed", "StudentUnsubscribed"], tags=["student:s2"]),
            QueryItem(
                types=["StudentSubscribed", "StudentUnsubscribed"],
                tags=["course:c2", "student:s1"],
            ),
        ]
    )


def test_an_append_on_a_stale_decision_is_refused_and_writes_nothing(store: EventStore) -> None:
    courses = _school(store)
    decisions = Decisions(store, course_events)
    decision = decisions.read(_seats("c1"))
    courses.subscribe("s2", "c1")  # takes the last seat after the decision read
    with pytest.raises(AppendConditionFailed) as refused:
        decisions.append(decision, "student-s3", _subscribe("s3", "c1")(decision))
    assert (refused.value.after, refused.value.position) == (6, 7)
    assert store.high_water_mark() == 7


def test_events_the_decision_did_not_read_do_not_refuse_its_append(store: EventStore) -> None:
    courses = _school(store)
    decisions = Decisions(store, course_events)
    decision = decisions.read(_seats("c1"))
    courses.subscribe("s2", "c2")  # another course
    courses.register_student("s3", "cat")
    result = decisions.append(decision, "student-s2", _subscribe("s2", "c1")(decision))
    assert result is not None and result.positions == (9,)
    stored = store.read_event(next(iter(store.read_stream("student-s2", from_version=3))).id)
    assert stored is not None and stored.tags == ("course:c1", "student:s2")


def test_a_decision_that_lost_its_race_is_decided_again_on_a_fresh_read(
    store: EventStore,
) -> None:
    courses = _school(store)
    decisions = Decisions(store, course_events)
    seen: list[int] = []

    def decide(decision: Decision) -> StudentSubscribed:
        seen.append(decision["taken"])
        if len(seen) == 1:
            courses.subscribe("s2", "c1")  # a rival takes the last seat meanwhile
        return _subscribe("s3", "c1")(decision)

    with pytest.raises(CourseFull):
        decisions.execute(_seats("c1"), decide, stream_id="student-s3")
    assert seen == [1, 2]
    subscribers = [e.data["student_id"] for e in store.read_all(types=["StudentSubscribed"])]
    assert subscribers == ["s1", "s1", "s2"]


def test_a_decision_overtaken_on_every_attempt_raises_decision_conflict_and_writes_nothing(
    store: EventStore,
) -> None:
    _school(store)
    decisions = Decisions(store, course_events)
    attempts: list[int] = []

    def decide(decision: Decision) -> StudentSubscribed:
        attempts.append(decision.head)
        # A rival's event matching the decision's query, every time.
        rival = StudentUnsubscribed(student_id="s1", course_id="c1")
        store.append("student-s1", [course_events.to_new_event(rival, {})])
        return StudentSubscribed(student_id="s2", course_id="c1")

    with pytest.raises(DecisionConflict) as conflict:
        decisions.execute(_seats("c1"), decide, stream_id="student-s2", attempts=3)
    assert attempts == [6, 7, 8]
    assert (conflict.value.attempts, conflict.value.after, conflict.value.position) == (3, 8, 9)
    assert isinstance(conflict.value, AppendConditionFailed)
    assert "overtaken 3 times in a row" in str(conflict.value)
    assert store.stream_version("student-s2") == 1  # registered, never subscribed


def test_nothing_decided_appends_nothing(store: EventStore) -> None:
    _school(store)
    decisions = Decisions(store, course_events)
    assert decisions.execute(_seats("c1"), lambda _: None, stream_id="x-1") is None
    assert decisions.execute(_seats("c1"), lambda _: [], stream_id="x-1") is None
    assert store.high_water_mark() == 6
    with pytest.raises(TypeError, match="a DomainEvent, a list of them or None"):
        decisions.execute(_seats("c1"), lambda _: "event", stream_id="x-1")  # type: ignore[arg-type,return-value]


def test_decided_events_carry_the_command_context_and_ids_from_the_idempotency_key(
    store: EventStore,
) -> None:
    _school(store)
    decisions = Decisions(store, course_events)
    key = uuid.uuid4()
    with command_context(correlation_id="enrol-7", user="registrar"):
        result = decisions.execute(
            _seats("c2"),
            _subscribe("s2", "c2"),
            stream_id="student-s2",
            idempotency_key=key,
            metadata={"channel": "web"},
        )
    assert result is not None
    stored = store.read_event(key)
    assert stored is not None and stored.position == result.positions[0]
    assert stored.metadata["correlation_id"] == "enrol-7"
    assert (stored.metadata["user"], stored.metadata["channel"]) == ("registrar", "web")


def test_a_keyed_decision_sent_again_is_answered_as_first_though_it_would_now_refuse(
    store: EventStore,
) -> None:
    _school(store)
    decisions = Decisions(store, course_events)
    key = uuid.uuid4()

    def send() -> AppendResult | None:
        return decisions.execute(
            _seats("c1"), _subscribe("s2", "c1"), stream_id="student-s2", idempotency_key=key
        )

    sent = [send(), send()]
    store.append("other-1", [NewEvent("Noise", {})])
    # The last seat of c1 is s2's own: decided afresh, the request would be CourseFull.
    sent.append(send())
    assert sent[0] is not None and sent == [sent[0]] * 3
    assert sent[0].positions == (7,) and store.high_water_mark() == 8
    with pytest.raises(CourseFull):
        decisions.execute(_seats("c1"), _subscribe("s3", "c1"), stream_id="student-s3")


def test_projections_are_declared_with_event_classes_the_registry_knows() -> None:
    class Unregistered(DomainEvent):
        pass

    with pytest.raises(RegistrationError, match="needs handlers"):
        DecisionProjection(0, {})
    with pytest.raises(RegistrationError, match="keyed by DomainEvent classes"):
        DecisionProjection(0, {"CourseDefined": lambda s, e: s})  # type: ignore[dict-item]
    with pytest.raises(RegistrationError, match="must be callable"):
        DecisionProjection(0, {Unregistered: 1})  # type: ignore[dict-item]
    with pytest.raises(InvalidEvent, match="control characters"):
        DecisionProjection(0, {Unregistered: lambda s, e: s}, tags=["a\nb"])
    with EventStore.open("memory://") as store:
        decisions = Decisions(store, course_events)
        with pytest.raises(RegistrationError, match="is not registered"):
            decisions.read({"x": DecisionProjection(0, {Unregistered: lambda s, e: s})})
        with pytest.raises(RegistrationError, match="projections by name"):
            decisions.read({})
        with pytest.raises(RegistrationError, match="an EventRegistry"):
            Decisions(store, object())  # type: ignore[arg-type]


def test_an_event_declares_its_tags_and_every_append_of_it_carries_them() -> None:
    registry = EventRegistry()

    @registry.event("Plain")
    class Plain(DomainEvent):
        pass

    new = course_events.to_new_event(StudentSubscribed(student_id="s1", course_id="c1"), {})
    assert tuple(new.tags) == ("student:s1", "course:c1")
    assert tuple(registry.to_new_event(Plain(), {}).tags) == ()
    with EventStore.open("memory://") as store:
        store.append("x-1", [new, NewEvent("Other", {})])
        assert [e.tags for e in store.read_all()] == [("course:c1", "student:s1"), ()]


# --- the async face ---------------------------------------------------------------------


def run(test: Callable[[AsyncEventStore], Awaitable[T]], url: str) -> T:
    async def main() -> T:
        async with await AsyncEventStore.open(url) as store:
            return await asyncio.wait_for(test(store), 60)

    return asyncio.run(main())


async def _append(store: AsyncEventStore, stream_id: str, *events: DomainEvent) -> None:
    await store.append(stream_id, [course_events.to_new_event(e, {}) for e in events])


async def _async_school(store: AsyncEventStore) -> None:
    """`_school`'s six events, through the async store."""
    await _append(store, "course-c1", CourseDefined(course_id="c1", title="One", capacity=2))
    await _append(store, "course-c2", CourseDefined(course_id="c2", title="Two", capacity=5))
    await _append(store, "student-s1", StudentRegistered(student_id="s1", name="a", max_courses=9))
    await _append(store, "student-s2", StudentRegistered(student_id="s2", name="b", max_courses=9))
    await _append(store, "student-s1", StudentSubscribed(student_id="s1", course_id="c1"))
    await _append(store, "student-s1", StudentSubscribed(student_id="s1", course_id="c2"))


def test_the_async_face_answers_a_keyed_decision_sent_again_as_the_first_time(
    store_url: str,
) -> None:
    async def test(store: AsyncEventStore) -> None:
        await _async_school(store)
        decisions = AsyncDecisions(store, course_events)
        key = uuid.uuid4()
        answers = [
            await decisions.execute(
                _seats("c1"), _subscribe("s2", "c1"), stream_id="student-s2", idempotency_key=key
            )
            for _ in range(2)
        ]
        assert answers[0] is not None and answers == [answers[0]] * 2
        assert await store.high_water_mark() == 7

    run(test, store_url)


def test_the_async_face_reads_decides_and_appends_on_the_same_rules(store_url: str) -> None:
    async def test(store: AsyncEventStore) -> None:
        await _async_school(store)
        decisions = AsyncDecisions(store, course_events)
        decision = await decisions.read(_seats("c1"))
        assert (decision["capacity"], decision["taken"], decision.head) == (2, 1, 6)
        seen: list[int] = []

        async def decide(decision: Decision) -> StudentSubscribed:
            seen.append(decision["taken"])
            if len(seen) == 1:  # a rival takes the last seat meanwhile
                await _append(
                    store, "student-s2", StudentSubscribed(student_id="s2", course_id="c1")
                )
            return _subscribe("s3", "c1")(decision)

        with pytest.raises(CourseFull):
            await decisions.execute(_seats("c1"), decide, stream_id="student-s3")
        assert seen == [1, 2]
        result = await decisions.execute(
            _seats("c2"), _subscribe("s2", "c2"), stream_id="student-s2"
        )
        assert result is not None and result.positions == (8,)
        stale = await decisions.read(_seats("c2"))
        await _append(store, "student-s2", StudentUnsubscribed(student_id="s2", course_id="c2"))
        with pytest.raises(AppendConditionFailed):
            await decisions.append(stale, "student-s3", _subscribe("s3", "c2")(stale))

        async def overtaken(decision: Decision) -> StudentSubscribed:
            await _append(store, "student-s2", StudentSubscribed(student_id="s2", course_id="c2"))
            return StudentSubscribed(student_id="s3", course_id="c2")

        with pytest.raises(DecisionConflict) as conflict:
            await decisions.execute(_seats("c2"), overtaken, stream_id="student-s3", attempts=2)
        assert conflict.value.attempts == 2
        assert await store.stream_version("student-s3") == 0

    run(test, store_url)
