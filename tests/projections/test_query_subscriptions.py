"""Projections, folds and subscriptions given a query of types and tags: exactly the matching
events, in order, once; the checkpoint passes the others; rebuilds read the same; writers in
other processes make no reader skip one."""

from __future__ import annotations

import asyncio
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from eventcraft.eventstore import (
    AsyncEventStore,
    EventStore,
    NewEvent,
    Query,
    QueryItem,
    RecordedEvent,
)
from eventcraft.projections import (
    AsyncProjectionRunner,
    DefinitionError,
    Fold,
    Projection,
    ProjectionRunner,
    ReadModel,
    State,
    Subscription,
)
from eventcraft.projections.selection import narrowed

from ..processes import PROCESSES
from .query_workers import tag_of, write_tagged

metadata = sa.MetaData()
roster_table = sa.Table(
    "query_roster",
    metadata,
    sa.Column("position", sa.BigInteger, nullable=False),
    sa.Column("type", sa.Text, nullable=False),
)
seats_table = sa.Table(
    "query_seats",
    metadata,
    sa.Column("student_id", sa.Text, primary_key=True),
    sa.Column("courses", sa.Integer, nullable=False),
)

C1 = Query([QueryItem(tags=["course:c1"])])
"""Every event about course c1."""
C1_SUBSCRIPTIONS = Query([QueryItem(types=["Subscribed", "Unsubscribed"], tags=["course:c1"])])


def _roster() -> Projection:
    """Subscriptions to c1, each applied event a row: an event applied twice would show."""
    roster = Projection("c1-roster", tables=[roster_table], query=C1)

    @roster.on("Subscribed", "Unsubscribed")
    def note(read_model: ReadModel, event: RecordedEvent) -> None:
        read_model.execute(
            sa.insert(read_model[roster_table]).values(position=event.position, type=event.type)
        )

    return roster


def _seat_change(state: State, event: RecordedEvent) -> State:
    step = 1 if event.type == "Subscribed" else -1
    return {**state, "courses": state["courses"] + step}


def _seats() -> Fold:
    """Per student, how many of c1's seats they hold (0 or 1)."""
    return Fold(
        "c1-seats",
        table=seats_table,
        key=lambda event: event.data["student"],
        initial=lambda key: {"student_id": key, "courses": 0},
        apply=_seat_change,
        types=["Subscribed", "Unsubscribed"],
        query=C1,
    )


def _subscribe(store: EventStore, student: str, *courses: str, kind: str = "Subscribed") -> None:
    tags = [f"student:{student}", *(f"course:{c}" for c in courses)]
    store.append(f"student-{student}", [NewEvent(kind, {"student": student}, tags=tags)])


def _history(store: EventStore) -> None:
    store.append("course-c1", [NewEvent("CourseDefined", {}, tags=["course:c1"])])
    store.append("course-c2", [NewEvent("CourseDefined", {}, tags=["course:c2"])])
    _subscribe(store, "s1", "c1")
    _subscribe(store, "s2", "c2")
    store.append("audit-1", [NewEvent("Audited", {})])
    _subscribe(store, "s3", "c1", "c2")
    _subscribe(store, "s1", "c1", kind="Unsubscribed")
    _subscribe(store, "s4", "c2")
    store.append("other-1", [NewEvent("Noise", {}) for _ in range(3)])


def _expected(store: EventStore, query: Query, types: set[str] | None = None) -> list[int]:
    return [
        e.position
        for e in store.read_all()
        if query.matches_event(e) and (types is None or e.type in types)
    ]


def _roster_rows(runner: ProjectionRunner) -> list[tuple[int, str]]:
    with runner.database.reading() as connection:
        return sorted((row[0], row[1]) for row in connection.execute(sa.select(roster_table)))


def _seat_rows(runner: ProjectionRunner) -> list[tuple[str, int]]:
    with runner.database.reading() as connection:
        return sorted((row[0], row[1]) for row in connection.execute(sa.select(seats_table)))


def test_definitions_given_a_query_get_exactly_its_events_once_in_order_and_pass_the_rest(
    store: EventStore,
) -> None:
    _history(store)
    received: list[int] = []
    feed = Subscription(
        "s1-feed",
        lambda event: received.append(event.position),
        query=Query([QueryItem(tags=["student:s1"]), QueryItem(types=["Audited"])]),
        categories=["student", "audit"],
    )
    with ProjectionRunner(store, [_roster(), _seats(), feed], batch_size=2) as runner:
        runner.catch_up()
        handled = {"Subscribed", "Unsubscribed"}
        roster = [p for p, _ in _roster_rows(runner)]
        assert roster == _expected(store, C1, handled) == [3, 6, 7]
        assert received == [3, 5, 7]
        assert _seat_rows(runner) == [("s1", 0), ("s3", 1)]
        head = store.high_water_mark()
        # Each checkpoint at the head, past the three events of noise no query selects.
        assert [s.position for s in runner.status()] == [head] * 3
        assert [s.lag_seconds for s in runner.status()] == [0.0] * 3

        _subscribe(store, "s5", "c1")
        _subscribe(store, "s1", "c2")
        store.append("other-2", [NewEvent("Noise", {})])
        runner.start()
        runner.wait_until(store.high_water_mark(), timeout=30)
        assert [p for p, _ in _roster_rows(runner)] == [3, 6, 7, 12]
        assert received == [3, 5, 7, 13]


def test_a_rebuild_of_a_query_projection_reads_what_catching_up_read(store: EventStore) -> None:
    _history(store)
    with ProjectionRunner(store, [_roster(), _seats()], batch_size=3) as runner:
        runner.catch_up()
        before = _roster_rows(runner)
        for name in ("c1-roster", "c1-seats"):
            report = runner.rebuild(name)
            assert report.position == store.high_water_mark()
        assert (
            _roster_rows(runner)
            == before
            == [(3, "Subscribed"), (6, "Subscribed"), (7, "Unsubscribed")]
        )
        assert _seat_rows(runner) == [("s1", 0), ("s3", 1)]


def test_a_query_none_of_whose_types_the_projection_handles_reads_nothing(
    store: EventStore,
) -> None:
    _history(store)
    roster = Projection(
        "audits", tables=[roster_table], query=Query([QueryItem(types=["Audited"])])
    )

    @roster.on("Subscribed")
    def note(read_model: ReadModel, event: RecordedEvent) -> None:
        raise AssertionError(f"not this projection's event: {event}")

    with ProjectionRunner(store, [roster]) as runner:
        runner.catch_up()
        assert [s.position for s in runner.status()] == [store.high_water_mark()]


def test_a_query_narrowed_to_the_types_a_definition_reads() -> None:
    item = QueryItem(types=["A", "B"], tags=["t"])
    assert narrowed(Query([item]), None) == Query([item])
    assert narrowed(Query(), ("A",)) == Query([QueryItem(types=["A"])])
    assert narrowed(Query([item]), ("B", "C")) == Query([QueryItem(types=["B"], tags=["t"])])
    assert narrowed(Query([QueryItem(tags=["t"])]), ("C",)) == Query(
        [QueryItem(types=["C"], tags=["t"])]
    )
    assert narrowed(Query([item]), ("C",)) is None
    with pytest.raises(DefinitionError, match="query must be an eventstore Query"):
        Subscription("bad", print, query=QueryItem(tags=["t"]))  # type: ignore[arg-type]


@pytest.mark.slow
def test_a_query_subscription_misses_nothing_while_processes_write(shared_store_url: str) -> None:
    processes, count = 4, 60
    received: list[RecordedEvent] = []
    watched = Subscription("watched", received.append, query=Query([QueryItem(tags=["watch:yes"])]))
    with (
        EventStore.open(shared_store_url) as store,
        ProjectionRunner(store, [watched], batch_size=7, lease_ttl=None) as runner,
    ):
        runner.start()
        with (
            PROCESSES.Manager() as manager,
            ProcessPoolExecutor(processes, mp_context=PROCESSES) as pool,
        ):
            barrier = manager.Barrier(processes)
            futures = [
                pool.submit(write_tagged, shared_store_url, worker, count, barrier)
                for worker in range(processes)
            ]
            written = {worker: future.result() for worker, future in enumerate(futures)}
        runner.wait_until(store.high_water_mark(), timeout=60)
        runner.stop()
    expected = sorted(
        position
        for worker, positions in written.items()
        for n, position in enumerate(positions)
        if tag_of(worker, n) == "watch:yes"
    )
    assert len(expected) == processes * count // 3
    assert [event.position for event in received] == expected
    assert all(event.tags == ("watch:yes",) for event in received)


def test_the_async_runner_reads_a_query_through_the_async_store(store_url: str) -> None:
    async def test() -> list[int]:
        received: list[int] = []

        async def note(event: RecordedEvent) -> None:
            received.append(event.position)

        async with await AsyncEventStore.open(store_url) as store:
            for n in range(6):
                tags = ["course:c1"] if n % 2 else ["course:c2"]
                await store.append(f"student-{n}", [NewEvent("Subscribed", {}, tags=tags)])
            query = Query([QueryItem(tags=["course:c1"])])
            feed = Subscription("c1-feed", note, query=query)
            async with await AsyncProjectionRunner.open(store, [feed], batch_size=2) as runner:
                await runner.catch_up()
                (status,) = await runner.status()
                assert status.position == 6
        return received

    assert asyncio.run(asyncio.wait_for(test(), 60)) == [2, 4, 6]


def test_a_new_query_projection_after_retention_reads_the_archive_then_the_store(
    shared_store_url: str, tmp_path: Path
) -> None:
    from eventcraft.eventstore.retention import RetentionPolicy

    from eventcraft.operations import retention

    old = datetime.now(UTC) - timedelta(days=40)
    with EventStore.open(shared_store_url) as store:
        for n in range(12):
            tags = [f"course:c{n % 2 + 1}"]
            event = NewEvent("Subscribed", {"student": f"s{n}"}, tags=tags, recorded_at=old)
            store.append(f"student-s{n}", [event, NewEvent("Noise", {}, recorded_at=old)])
        _subscribe(store, "s20", "c1")
        expected = _expected(store, C1_SUBSCRIPTIONS)
        report = retention.apply(
            store,
            [RetentionPolicy("student", max_age=timedelta(days=30))],
            [],
            str(tmp_path / "archive"),
        )
        assert report.archived > 0 and store.low_water_mark() > expected[2]
        with ProjectionRunner(store, [_roster()], batch_size=2) as runner:
            runner.catch_up()
            assert [p for p, _ in _roster_rows(runner)] == expected
