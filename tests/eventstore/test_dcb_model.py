"""Conditional and plain appends of tagged events from several threads at once, checked
against a sequential model, while a reader tails the log.

Each caller runs its operations in order on a thread of its own: decisions (read a
query, append with the condition taken from the read, or from an older read), plain
appends of tagged events, and retries of its earlier decisions. Afterwards the log,
replayed in position order, must justify every answer: a decision that succeeded met
no event matching its query between its read and its own positions but its own; a
refused one names a position holding a matching event after its read; a retry answers
as the first attempt; and the tailing reader saw every event once, in order.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest
from eventcraft.eventstore import (
    AppendCondition,
    AppendConditionFailed,
    AppendResult,
    EventStore,
    NewEvent,
    Query,
    QueryItem,
    RecordedEvent,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from . import workers
from .concurrent_callers import new_store_url, run_callers

TAGS = ("t:a", "t:b", "t:c")
TYPES = ("Booked", "Cancelled")

tags = st.lists(st.sampled_from(TAGS), max_size=2, unique=True)
item = st.tuples(st.lists(st.sampled_from(TYPES), max_size=1, unique=True), tags)
op = st.one_of(
    st.tuples(
        st.just("decide"),
        st.lists(item, min_size=1, max_size=2),
        st.sampled_from(TYPES),
        tags,
        st.integers(0, 2),  # how many positions older than the read `after` is
    ),
    st.tuples(st.just("plain"), st.sampled_from(TYPES), tags),
    st.tuples(st.just("retry"), st.integers(0, 5)),
)
plans = st.lists(st.lists(op, min_size=1, max_size=5), min_size=2, max_size=6)


@dataclass
class Decided:
    """One conditional append as sent and answered."""

    stream: str
    events: list[NewEvent]
    condition: AppendCondition
    outcome: AppendResult | AppendConditionFailed | None = None


@dataclass
class Caller:
    decided: list[Decided] = field(default_factory=list)
    plain: list[tuple[NewEvent, AppendResult]] = field(default_factory=list)
    retried: list[tuple[Decided, AppendResult | AppendConditionFailed]] = field(
        default_factory=list
    )


def _query(items: list[tuple[list[str], list[str]]]) -> Query:
    return Query([QueryItem(types=types, tags=item_tags) for types, item_tags in items])


def _decide(store: EventStore, sent: Decided) -> AppendResult | AppendConditionFailed:
    try:
        return store.append(sent.stream, sent.events, condition=sent.condition)
    except AppendConditionFailed as refused:
        return refused


def _run(store: EventStore, plan: list[tuple[Any, ...]], caller: Caller, n: int) -> None:
    for step in plan:
        if step[0] == "decide":
            _, items, type_, event_tags, older = step
            query = _query(items)
            read = store.read_query(query)
            after = max(0, read.head - older)
            event = NewEvent(type_, {"caller": n}, tags=event_tags)
            sent = Decided(f"c{n}-{uuid.uuid4().hex[:6]}", [event], AppendCondition(query, after))
            sent.outcome = _decide(store, sent)
            caller.decided.append(sent)
        elif step[0] == "plain":
            event = NewEvent(step[1], {"caller": n}, tags=step[2])
            caller.plain.append((event, store.append(f"p{n}", [event])))
        elif step[0] == "retry" and step[1] < len(caller.decided):
            earlier = caller.decided[step[1]]
            caller.retried.append((earlier, _decide(store, earlier)))


def _check(store: EventStore, callers: list[Caller], seen: list[uuid.UUID]) -> None:
    log = list(store.read_all())
    assert seen == [event.id for event in log], "the tailing reader missed or repeated events"
    by_id = {event.id: event for event in log}
    acknowledged: set[uuid.UUID] = set()

    def matching(query: Query, above: int, below: int) -> list[RecordedEvent]:
        return [e for e in log if above < e.position < below and query.matches_event(e)]

    for caller in callers:
        for event, result in caller.plain:
            assert by_id[event.id].position == result.positions[0]
            acknowledged.add(event.id)
        for sent in caller.decided:
            query, after = sent.condition.fail_if_events_match, sent.condition.after or 0
            (event,) = sent.events
            if isinstance(sent.outcome, AppendResult):
                mine = by_id[event.id]
                assert mine.position == sent.outcome.positions[0]
                conflicting = matching(query, after, mine.position)
                assert conflicting == [], f"{sent.stream} decided past {conflicting}"
                acknowledged.add(event.id)
            else:
                refused = sent.outcome
                assert isinstance(refused, AppendConditionFailed)
                assert refused.position > after
                (found,) = [e for e in log if e.position == refused.position]
                assert query.matches_event(found), "refused by an event that does not match"
        for sent, again in caller.retried:
            if isinstance(sent.outcome, AppendResult):
                assert again == sent.outcome, "a retry answered otherwise"
            elif isinstance(again, AppendResult):
                # Refused first, taken when sent again: judged as a decision of its own.
                (event,) = sent.events
                mine = by_id[event.id]
                query = sent.condition.fail_if_events_match
                assert matching(query, sent.condition.after or 0, mine.position) == []
                acknowledged.add(event.id)
    assert acknowledged == set(by_id), "the log holds events no caller was told of"


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(plan=plans)
@pytest.mark.parametrize("api", ["sync", "async"])
@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres"])
@pytest.mark.slow
def test_concurrent_decisions_agree_with_a_sequential_model(
    plan: list[list[tuple[Any, ...]]],
    backend: str,
    api: str,
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    url = new_store_url(backend, request, tmp_path_factory)
    with workers.opened(url, api) as store:
        callers = [Caller() for _ in plan]
        seen = run_callers(store, len(plan), lambda n: _run(store, plan[n], callers[n], n))
        _check(store, callers, seen)
