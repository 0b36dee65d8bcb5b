"""Decisions across streams: the state a rule needs, read by one query, kept by a condition.

A rule that spans aggregates ("a course takes at most 30 students, a
student at most 10 courses") is decided on a few small facts, each a
`DecisionProjection`: an initial state, how each event type evolves it,
and the tags its events carry::

    def course_capacity(course_id: str) -> DecisionProjection[int]:
        return DecisionProjection(
            0,
            {CourseDefined: lambda _, event: event.capacity},
            tags=[f"course:{course_id}"],
        )

A decision reads the events of all its projections with one query (the OR
of theirs), folds each event into the projections it matches, and appends
with the condition "fail if an event matching that query was stored after
the position I read up to" (Dynamic Consistency Boundaries, dcb.events).
Everything here is free of the store: `Decisions` and `AsyncDecisions` only
read and append, so the sync and async faces cannot decide differently.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from eventcraft.eventstore import (
    AppendCondition,
    AppendConditionFailed,
    NewEvent,
    Query,
    QueryItem,
    QueryResult,
    RecordedEvent,
)

from .context import CommandContext, current_context
from .errors import DecisionConflict, RegistrationError
from .event import DomainEvent
from .registry import EventRegistry
from .repository_rules import keyed_ids

S = TypeVar("S")

Evolve = Callable[[Any, Any], Any]
"""`evolve(state, event) -> state` for one event class: pure, returning the next state."""

Decided = DomainEvent | Sequence[DomainEvent] | None
"""What a decide function returns: the events to append (None or none: nothing)."""


class DecisionProjection(Generic[S]):
    """One fact a decision needs: `initial`, evolved by `handlers[type(event)]` for each
    event of those classes that carries all of `tags`, in log order.

    The handlers must be pure: they see only the state and the event, and
    return the next state. `tags=()` reads every event of the handled
    classes: keep that for facts about the whole log, since a condition on
    an item without tags waits for every append (see docs/ARCHITECTURE.md).

    Example::

        from eventcraft.domain import DecisionProjection, Decisions, DomainEvent, EventRegistry
        from eventcraft.eventstore import EventStore

        school = EventRegistry()

        @school.event("CourseDefined")
        class CourseDefined(DomainEvent):
            course_id: str
            capacity: int

            def event_tags(self) -> list[str]:
                return [f"course:{self.course_id}"]

        def course_capacity(course_id: str) -> DecisionProjection[int]:
            return DecisionProjection(
                0,
                {CourseDefined: lambda _, event: event.capacity},
                tags=[f"course:{course_id}"],
            )

        store = EventStore.open("sqlite:///school.db")
        for course_id, capacity in [("c1", 30), ("c2", 5)]:
            defined = CourseDefined(course_id=course_id, capacity=capacity)
            store.append(f"course-{course_id}", [school.to_new_event(defined, {})])
        decision = Decisions(store, school).read({"capacity": course_capacity("c2")})
        assert decision["capacity"] == 5 and decision.events == 1  # c1's event is not read
        store.close()
    """

    __slots__ = ("handlers", "initial", "tags")

    def __init__(
        self,
        initial: S,
        handlers: Mapping[type[DomainEvent], Callable[[S, Any], S]],
        *,
        tags: Iterable[str] = (),
    ) -> None:
        if not isinstance(handlers, Mapping) or not handlers:
            raise RegistrationError(
                "a DecisionProjection needs handlers: a dict of DomainEvent class to "
                f"evolve(state, event), not {handlers!r:.80}"
            )
        for event_class, evolve in handlers.items():
            if not (isinstance(event_class, type) and issubclass(event_class, DomainEvent)):
                raise RegistrationError(
                    f"a DecisionProjection's handlers are keyed by DomainEvent classes, "
                    f"not {event_class!r}"
                )
            if not callable(evolve):
                raise RegistrationError(
                    f"the handler of {event_class.__qualname__} must be callable, not {evolve!r}"
                )
        self.initial = initial
        self.handlers: dict[type[DomainEvent], Evolve] = dict(handlers)
        self.tags = QueryItem(tags=tags).tags  # checked as the store checks them

    def item(self, registry: EventRegistry) -> QueryItem:
        """The query item of its events: the names `registry` stores its classes under."""
        return QueryItem(types=[registry.type_of(c).name for c in self.handlers], tags=self.tags)

    def __repr__(self) -> str:
        names = [c.__qualname__ for c in self.handlers]
        return f"DecisionProjection(initial={self.initial!r}, on={names}, tags={list(self.tags)})"


@dataclass(frozen=True, slots=True)
class Decision:
    """What a decision read: each projection's state by name, and the condition to append
    with so that the append fails if anything it read has changed since.

    Example::

        from eventcraft.domain import DecisionProjection, Decisions, DomainEvent, EventRegistry
        from eventcraft.eventstore import AppendConditionFailed, EventStore

        school = EventRegistry()

        @school.event("StudentSubscribed")
        class StudentSubscribed(DomainEvent):
            student_id: str
            course_id: str

            def event_tags(self) -> list[str]:
                return [f"course:{self.course_id}"]

        store = EventStore.open("sqlite:///school.db")
        decisions = Decisions(store, school)
        taken = DecisionProjection(0, {StudentSubscribed: lambda n, _: n + 1}, tags=["course:c1"])
        decision = decisions.read({"taken": taken})
        assert (decision["taken"], decision.events, decision.head) == (0, 0, 0)
        decisions.append(decision, "course-c1", StudentSubscribed(student_id="ann", course_id="c1"))
        try:  # the read is stale now: ann's subscription matches its query
            bob = StudentSubscribed(student_id="bob", course_id="c1")
            decisions.append(decision, "course-c1", bob)
        except AppendConditionFailed as stale:
            assert stale.position == 1  # ann's, stored after the read
        store.close()
    """

    states: Mapping[str, Any]
    """The state of each projection, by the name it was given."""
    condition: AppendCondition
    """The OR of the projections' queries, after the position the read covered."""
    events: int
    """How many events the read folded."""

    def __getitem__(self, name: str) -> Any:
        return self.states[name]

    @property
    def query(self) -> Query:
        return self.condition.fail_if_events_match

    @property
    def head(self) -> int:
        """The position the read covered: the condition's `after`."""
        after = self.condition.after
        return 0 if after is None else after


@dataclass(frozen=True, slots=True)
class _Part:
    name: str
    query: Query
    projection: DecisionProjection[Any]


@dataclass(frozen=True, slots=True)
class DecisionPlan:
    """The projections of one decision, with their queries: what to read and how to fold."""

    parts: tuple[_Part, ...]
    query: Query
    """The OR of the parts' queries: what the decision reads and what its condition checks."""


class DecisionRules:
    """The store-free part of `Decisions` and `AsyncDecisions`: plan, fold, encode."""

    def __init__(self, registry: EventRegistry) -> None:
        if not isinstance(registry, EventRegistry):
            raise RegistrationError(f"decisions need an EventRegistry, not {registry!r}")
        self.registry = registry

    def plan(self, projections: Mapping[str, DecisionProjection[Any]]) -> DecisionPlan:
        if not isinstance(projections, Mapping) or not projections:
            raise RegistrationError(
                "a decision needs its projections by name: "
                f"{{'name': DecisionProjection(...), ...}}, not {projections!r:.80}"
            )
        parts = []
        for name, projection in projections.items():
            if not isinstance(projection, DecisionProjection):
                raise RegistrationError(
                    f"{name!r}: a decision is made of DecisionProjections, not {projection!r:.80}"
                )
            parts.append(_Part(name, Query([projection.item(self.registry)]), projection))
        query = Query([part.query.items[0] for part in parts])
        return DecisionPlan(tuple(parts), query)

    def fold(
        self, plan: DecisionPlan, read: QueryResult, *, taken: RecordedEvent | None = None
    ) -> Decision:
        """Each projection's state after the events it matches among `read`'s; with
        `taken` (the first event of a keyed request sent again, `taken_before`), only
        those stored before it: what the request was first decided on."""
        events, head = read.events, read.head
        if taken is not None:
            events = [event for event in events if event.position < taken.position]
            head = taken.position - 1
        states = {part.name: part.projection.initial for part in plan.parts}
        decode = self.registry.decode
        for recorded in events:
            event = decode(recorded)
            for part in plan.parts:
                if part.query.matches(recorded.type, recorded.tags):
                    handler = part.projection.handlers[type(event)]
                    states[part.name] = handler(states[part.name], event)
        return Decision(states, AppendCondition(plan.query, after=head), len(events))

    def to_append(
        self,
        decided: Decided,
        metadata: Mapping[str, Any] | None,
        idempotency_key: uuid.UUID | None,
    ) -> list[NewEvent]:
        """The events a decision appends: tagged by themselves, their metadata from the
        current `command_context` (else new ids) updated by `metadata`, their ids from
        `idempotency_key` when one is given (`keyed_ids`)."""
        events = self.events_of(decided)
        context = current_context() or CommandContext.new()
        base = {**context.metadata(), **(metadata or {})}
        ids: list[uuid.UUID | None] = [None] * len(events)
        if idempotency_key is not None:
            ids = list(keyed_ids(idempotency_key, len(events)))
        to_new_event = self.registry.to_new_event
        return [to_new_event(event, base, id) for event, id in zip(events, ids, strict=True)]

    @staticmethod
    def events_of(decided: Decided) -> list[DomainEvent]:
        if decided is None:
            return []
        if isinstance(decided, DomainEvent):
            return [decided]
        if isinstance(decided, str | bytes) or not isinstance(decided, Sequence):
            raise TypeError(
                "a decision returns a DomainEvent, a list of them or None, "
                f"not {type(decided).__name__}"
            )
        events = list(decided)
        for event in events:
            if not isinstance(event, DomainEvent):
                raise TypeError(f"a decision returns DomainEvents, found {event!r:.80}")
        return events


def conflict(failed: AppendConditionFailed, attempts: int) -> DecisionConflict:
    """What a decision raises when its last attempt's condition failed as `failed` did."""
    return DecisionConflict(failed.stream_id, failed.query, failed.after, failed.position, attempts)
