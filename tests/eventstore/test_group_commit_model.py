"""Many callers appending at once, their appends grouped into shared commits, checked
against a sequential model: exact, ANY and no-stream versions, wrong versions, retries
of earlier appends, reused ids and `append_many`, while a reader tails the log.

Each caller runs its operations in order on a thread of its own, against one store
(the sync API, or the async one behind a blocking face, whose tasks are grouped
likewise). Afterwards every answer must fit one order of the successful appends, the
order of their positions: each found its stream at the version it reports, each
refusal names a version the stream did have, a retry answers as the first attempt, and
the log holds every successful append once, which the tailing reader saw once, in order.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
from eventcraft.eventstore import (
    ANY,
    NO_STREAM,
    AppendResult,
    DuplicateEventId,
    EventStore,
    NewEvent,
    WrongExpectedVersion,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from . import workers
from .concurrent_callers import new_store_url, run_callers

STREAMS = ("acct-a", "acct-b", "acct-c")
WRONG = 10_000  # a version no stream reaches here

op = st.one_of(
    st.tuples(
        st.just("append"),
        st.sampled_from(STREAMS),
        st.integers(1, 3),
        st.sampled_from(["any", "no_stream", "current", "wrong"]),
    ),
    st.tuples(st.just("retry"), st.integers(0, 7)),
    st.tuples(st.just("reuse"), st.integers(0, 7), st.sampled_from(STREAMS)),
    st.tuples(st.just("many"), st.sampled_from(["current", "wrong"])),
)
plans = st.lists(st.lists(op, min_size=1, max_size=6), min_size=3, max_size=8)


@dataclass
class Sent:
    """One call as sent and answered."""

    appends: list[tuple[str, list[NewEvent], object]]
    outcome: list[AppendResult] | BaseException | None = None


@dataclass
class Caller:
    sent: list[Sent] = field(default_factory=list)


def _expected(store: EventStore, stream: str, kind: str) -> object:
    if kind == "any":
        return ANY
    if kind == "no_stream":
        return NO_STREAM
    if kind == "wrong":
        return WRONG
    return store.stream_version(stream)  # may be stale by the time it is used: that is the race


def _run(store: EventStore, plan: list[tuple[Any, ...]], caller: Caller, n: int) -> None:
    for step in plan:
        if step[0] == "retry" and step[1] < len(caller.sent):
            earlier = caller.sent[step[1]]
            sent = Sent(earlier.appends)
        elif step[0] == "reuse" and step[1] < len(caller.sent):
            earlier = caller.sent[step[1]]
            reused = [e for _, events, _ in earlier.appends for e in events]
            sent = Sent([(step[2], reused, ANY)])
        elif step[0] == "many":
            a, b = f"pair-{n}-x", f"pair-{n}-y"
            sent = Sent(
                [
                    (a, [NewEvent("Paired", {"n": n})], _expected(store, a, step[1])),
                    (b, [NewEvent("Paired", {"n": n})], _expected(store, b, "current")),
                ]
            )
        elif step[0] == "append":
            _, stream, size, kind = step
            events = [NewEvent("Counted", {"caller": n, "i": i}) for i in range(size)]
            sent = Sent([(stream, events, _expected(store, stream, kind))])
        else:
            continue
        try:
            if len(sent.appends) == 1:
                stream, events, expected = sent.appends[0]
                sent.outcome = [store.append(stream, events, cast(Any, expected))]
            else:
                sent.outcome = store.append_many(cast(Any, sent.appends))
        except (WrongExpectedVersion, DuplicateEventId) as error:
            sent.outcome = error
        caller.sent.append(sent)


def _check(store: EventStore, callers: list[Caller], seen: list[uuid.UUID]) -> None:
    log = list(store.read_all())
    by_id = {event.id: event for event in log}
    assert len(by_id) == len(log), "an event is in the log twice"
    assert seen == [event.id for event in log], "the tailing reader missed or repeated events"
    written: list[tuple[int, str, int, object, int]] = []  # first position, stream, n, ...
    stored_ids: set[uuid.UUID] = set()
    for caller in callers:  # a caller's ids are its own: its calls decide alone, in order
        answered: dict[tuple[tuple[str, tuple[uuid.UUID, ...]], ...], object] = {}
        for sent in caller.sent:
            key = tuple((stream, tuple(e.id for e in events)) for stream, events, _ in sent.appends)
            ids = {id for _, call_ids in key for id in call_ids}
            if key in answered:  # the same ids, the same streams: a retry
                assert sent.outcome == answered[key], "a retry answered otherwise"
                continue
            if ids & stored_ids:  # stored ids sent otherwise
                assert isinstance(sent.outcome, DuplicateEventId), "a stored id was taken again"
                continue
            if not isinstance(sent.outcome, list):
                # Its events may be in the log, written by a later call that sent them
                # again; the log holding only what successes reported (below) is the check.
                assert isinstance(sent.outcome, WrongExpectedVersion)
                continue
            answered[key] = sent.outcome
            stored_ids |= ids
            for (stream, events, expected), result in zip(sent.appends, sent.outcome, strict=True):
                stored = [by_id[e.id] for e in events]
                assert [e.position for e in stored] == list(result.positions)
                assert {e.stream_id for e in stored} == {stream}
                assert [e.version for e in stored] == list(
                    range(result.version - len(events) + 1, result.version + 1)
                )
                written.append((result.positions[0], stream, len(events), expected, result.version))
    assert stored_ids == set(by_id), "the log holds events no caller was told of"
    # The sequential model: replay the successes in position order.
    versions: dict[str, int] = {}
    history: dict[str, set[int]] = {s: {0} for s in {w[1] for w in written}}
    for _, stream, n, expected, version in sorted(written):
        base = versions.get(stream, 0)
        assert version == base + n, f"{stream}: found at {version - n}, the model says {base}"
        if expected is NO_STREAM:
            assert base == 0
        elif isinstance(expected, int):
            assert expected == base
        versions[stream] = version
        history[stream].add(version)
    for caller in callers:
        for sent in caller.sent:
            if isinstance(sent.outcome, WrongExpectedVersion):
                error = sent.outcome
                assert error.actual in history.get(error.stream_id, {0})
                assert error.expected is NO_STREAM or error.expected != error.actual


@pytest.fixture(params=["sync", "async"])
def api(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(plan=plans)
@pytest.mark.slow
def test_concurrent_callers_agree_with_a_sequential_model(
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
