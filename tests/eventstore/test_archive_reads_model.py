"""Hypothesis: whatever the history (appends, deletions), the retention rules and the
marks of the runs, a store opened with `archive=` reads from any start, with any limit
and filter, exactly what the store read before the runs, and every stream as before."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from eventcraft.eventstore import EventStore, NewEvent
from eventcraft.eventstore.retention import RetentionPolicy, Truncation
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from eventcraft.operations import retention

# slow: A hypothesis model over real retention runs.
pytestmark = pytest.mark.slow

step = st.one_of(
    st.tuples(st.just("append"), st.integers(0, 3), st.integers(1, 4), st.sampled_from(["A", "B"])),
    st.tuples(st.just("delete"), st.integers(0, 3), st.just(0), st.just("")),
)
histories = st.lists(step, min_size=1, max_size=25)
rules = st.tuples(
    st.integers(1, 3),  # each order's newest N stay
    st.lists(st.tuples(st.integers(0, 3), st.integers(2, 6)), max_size=2),  # truncations
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories, st.lists(rules, min_size=1, max_size=3), st.data())
def test_reads_with_archive_after_any_runs_are_the_reads_before_them(
    history: list[tuple[str, int, int, str]],
    runs: list[tuple[int, list[tuple[int, int]]]],
    data: st.DataObject,
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'events.db'}"
        with EventStore.open(url) as store:
            for kind, n, count, type in history:
                if kind == "append":
                    store.append(f"order-{n}", [NewEvent(type, {"n": n}) for _ in range(count)])
                elif store.stream_version(f"order-{n}"):
                    store.delete_stream(f"order-{n}")
            head = store.high_water_mark()
            before = list(store.read_all())
            streams = {f"order-{n}": list(store.read_stream(f"order-{n}")) for n in range(4)}
            for keep, cuts in runs:
                up_to = data.draw(st.integers(0, head), label="up_to")
                truncations = [
                    Truncation(f"order-{n}", v)
                    for n, v in cuts
                    if store.stream_version(f"order-{n}")
                ]
                policy = [RetentionPolicy("order", max_count=keep)]
                retention.apply(store, policy, truncations, f"{folder}/archive", up_to=up_to)
            removed = sum(run.removed for run in store.retention.runs())
            event(f"removed {'none' if not removed else 'some'}")
        with EventStore.open(url, archive=True) as whole:
            assert list(whole.read_all()) == before
            after = data.draw(st.integers(0, head), label="after")
            limit = data.draw(st.one_of(st.none(), st.integers(1, 5)), label="limit")
            types = data.draw(st.one_of(st.none(), st.just(["A"])), label="types")
            expected = [e for e in before if e.position > after and (not types or e.type in types)]
            assert list(whole.read_all(after=after, limit=limit, types=types)) == expected[:limit]
            assert [r.id for r in whole.read_all_encoded(after=after)] == [
                str(e.id) for e in before if e.position > after
            ]
            for stream_id, events in streams.items():
                assert list(whole.read_stream(stream_id)) == events
                assert list(whole.read_stream(stream_id, backwards=True)) == events[::-1]
