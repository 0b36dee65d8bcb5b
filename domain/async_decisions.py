"""`AsyncDecisions`: read the state a rule needs, decide, and append on the read's condition.

::

    decisions = AsyncDecisions(store, registry)

    def subscribe(decision: Decision) -> StudentSubscribed:
        if decision["subscribed"] >= decision["capacity"]:
            raise CourseFull(course_id)
        return StudentSubscribed(student_id=student_id, course_id=course_id)

    await decisions.execute(
        {"capacity": course_capacity(course_id), "subscribed": subscriptions(course_id)},
        subscribe,
        stream_id=f"course-{course_id}",
    )

A decision that lost its race (an event matching its query was stored
after its read) is read and decided again, up to `attempts` times; then
`DecisionConflict`. What is decided and how is `DecisionRules`', written
once for the sync and async faces.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from eventcraft.eventstore import AppendConditionFailed, AppendResult, AsyncEventStore

from .decision_rules import Decided, Decision, DecisionProjection, DecisionRules, conflict
from .registry import EventRegistry
from .repository_rules import check_attempts, taken_before


class AsyncDecisions(DecisionRules):
    """Decisions made on the events of `store` whose classes `registry` holds.

    Example::

        from eventcraft.domain import (
            AsyncDecisions, DecisionProjection, DomainError, DomainEvent, EventRegistry,
        )
        from eventcraft.eventstore import AsyncEventStore

        school = EventRegistry()

        @school.event("StudentSubscribed")
        class StudentSubscribed(DomainEvent):
            student_id: str
            course_id: str

            def event_tags(self) -> list[str]:
                return [f"course:{self.course_id}", f"student:{self.student_id}"]

        taken = DecisionProjection(0, {StudentSubscribed: lambda n, _: n + 1}, tags=["course:c1"])

        def subscribe(student_id):
            def decide(decision):
                if decision["taken"] >= 2:  # a course of two seats
                    raise DomainError("course c1 is full")
                return StudentSubscribed(student_id=student_id, course_id="c1")

            return decide

        store = await AsyncEventStore.open("sqlite:///school.db")
        decisions = AsyncDecisions(store, school)
        await decisions.execute({"taken": taken}, subscribe("ann"), stream_id="course-c1")
        await decisions.execute({"taken": taken}, subscribe("bob"), stream_id="course-c1")
        try:
            await decisions.execute({"taken": taken}, subscribe("cat"), stream_id="course-c1")
        except DomainError as full:
            assert str(full) == "course c1 is full"
        assert await store.stream_version("course-c1") == 2
        await store.close()
    """

    def __init__(self, store: AsyncEventStore, registry: EventRegistry) -> None:
        super().__init__(registry)
        self.store = store

    async def read(self, projections: Mapping[str, DecisionProjection[Any]]) -> Decision:
        """Each projection's state, folded from one read of the OR of their queries."""
        plan = self.plan(projections)
        return self.fold(plan, await self.store.read_query(plan.query))

    async def append(
        self,
        decision: Decision,
        stream_id: str,
        decided: Decided,
        *,
        metadata: Mapping[str, Any] | None = None,
        idempotency_key: uuid.UUID | None = None,
    ) -> AppendResult | None:
        """Append what was `decided` to `stream_id`, unless an event matching the
        decision's query was stored since its read: then `AppendConditionFailed`, and
        nothing is written. None when nothing was decided."""
        events = self.to_append(decided, metadata, idempotency_key)
        if not events:
            return None
        return await self.store.append(stream_id, events, condition=decision.condition)

    async def execute(
        self,
        projections: Mapping[str, DecisionProjection[Any]],
        decide: Callable[[Decision], Decided | Awaitable[Decided]],
        *,
        stream_id: str,
        attempts: int = 5,
        metadata: Mapping[str, Any] | None = None,
        idempotency_key: uuid.UUID | None = None,
    ) -> AppendResult | None:
        """Read, `decide`, append to `stream_id` on the read's condition; again from a fresh
        read when the condition failed, `attempts` times in all (then `DecisionConflict`).

        `decide` is awaited if it returns an awaitable.
        `decide` raises (a `DomainError`) to refuse, and nothing is written;
        it may run several times, so it must act only through what it returns.
        With `idempotency_key` (a client's request id) the events' ids derive
        from it, as with `AsyncRepository.execute`: a request sent again is decided
        on what it was first decided on, and answered with the first append's
        result. Returns the append's result, None when nothing was decided.
        """
        check_attempts(attempts)
        plan = self.plan(projections)
        taken = None
        if idempotency_key is not None:
            taken = taken_before(await self.store.read_event(idempotency_key), stream_id)
        for attempt in range(1, attempts + 1):
            decision = self.fold(plan, await self.store.read_query(plan.query), taken=taken)
            decided = decide(decision)
            if True:  # ASYNC
                if inspect.isawaitable(decided):
                    decided = await decided
            try:
                return await self.append(
                    decision,
                    stream_id,
                    decided,
                    metadata=metadata,
                    idempotency_key=idempotency_key,
                )
            except AppendConditionFailed as failed:
                if attempt == attempts:
                    raise conflict(failed, attempts) from failed
        raise AssertionError("unreachable")
