"""Retention on the SQL backends: a run archives the log up to its mark, then removes what
its policies name in one transaction; positions are never reused, a stream keeps its
newest event and its version, the database refuses deletes outside a run, and a rebuild or
a new projection after the run reads the archive, then the store, and equals what it was."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from eventcraft.eventstore import EventStore, NewEvent
from eventcraft.eventstore.retention import RetentionPolicy, Truncation
from eventcraft.projections import Fold, ProjectionRunner

from eventcraft.operations import retention

from ..processes import PROCESSES

metadata = sa.MetaData()
tallies = sa.Table(
    "stream_tallies",
    metadata,
    sa.Column("stream", sa.Text, primary_key=True),
    sa.Column("events", sa.Integer, nullable=False),
    sa.Column("last", sa.Text, nullable=False),
)


def _tally(name: str) -> Fold:
    return Fold(
        name,
        table=tallies,
        key=lambda event: event.stream_id,
        initial=lambda key: {"stream": key, "events": 0, "last": ""},
        apply=lambda state, event: {**state, "events": state["events"] + 1, "last": event.type},
    )


def _rows(runner: ProjectionRunner) -> list[tuple[Any, ...]]:
    with runner.database.reading() as connection:
        return [tuple(r) for r in connection.execute(sa.select(tallies).order_by("stream"))]


def _history(store: EventStore) -> None:
    old = datetime.now(UTC) - timedelta(days=40)
    for n in range(5):
        store.append(
            f"order-{n}",
            [
                NewEvent("Placed", {"n": n}, recorded_at=old),
                NewEvent("Paid", {"n": n}, recorded_at=old),
                NewEvent("Shipped", {"n": n}),
            ],
        )
    store.append("audit-1", [NewEvent("Seen", {"i": i}) for i in range(10)])
    store.append("cart-1", [NewEvent("Added", {"i": i}) for i in range(4)])


POLICIES = [
    RetentionPolicy("order", max_age=timedelta(days=30)),
    RetentionPolicy("audit", max_count=3),
]
TRUNCATIONS = [Truncation("cart-1", 3)]


def _delete_refused(url: str) -> None:
    """The database refuses a DELETE of an event outside a run."""
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            with pytest.raises(sqlite3.DatabaseError, match="append-only"):
                conn.execute("DELETE FROM eventcraft_events")
            with pytest.raises(sqlite3.DatabaseError, match="append-only"):
                conn.execute("UPDATE eventcraft_events SET type = 'x'")
        return
    base, schema = url.split("?schema=")
    with psycopg.connect(base, options=f"-c search_path={schema}") as conn:
        for statement in (
            "DELETE FROM eventcraft_events",
            "UPDATE eventcraft_events SET type = 'x'",
        ):
            with pytest.raises(psycopg.Error, match="append-only"):
                conn.execute(statement)
            conn.rollback()


def test_a_run_archives_then_removes_and_the_log_reads_as_before(
    shared_store_url: str, tmp_path: Path
) -> None:
    archive = str(tmp_path / "archive")
    url = shared_store_url
    with EventStore.open(url) as store:
        _history(store)
        head = store.high_water_mark()
        with ProjectionRunner(store, [_tally("tallies")]) as runner:
            runner.catch_up()
            before = _rows(runner)
            checkpoints = {status.name: status.position for status in runner.status()}
            planned = retention.plan(store, POLICIES, TRUNCATIONS, archive, checkpoints=checkpoints)
            assert (planned.up_to, planned.held_by, planned.archived_to) == (head, None, 0)
            assert [r.events for r in planned.removals] == [10, 7, 2]
            assert store.low_water_mark() == 0

            # Paced: half the time at work, a part at a time; the same run in the end.
            report = retention.apply(
                store, POLICIES, TRUNCATIONS, archive, checkpoints=checkpoints, pace=0.5
            )
            assert (report.run.removed, report.run.up_to, report.archived) == (19, head, head)
            assert store.low_water_mark() == head
            assert [r.up_to for r in store.retention.runs()] == [head]

            kept = {
                e.stream_id: [x.version for x in store.read_stream(e.stream_id)]
                for e in store.read_all()
            }
            assert kept == {
                **{f"order-{n}": [3] for n in range(5)},
                "audit-1": [8, 9, 10],
                "cart-1": [3, 4],
            }
            _delete_refused(url)

            # The log goes on: no position or version is used again.
            result = store.append("order-0", [NewEvent("Returned", {})])
            assert (result.version, result.positions) == (4, (head + 1,))

            runner.catch_up()
            runner.rebuild("tallies")
            after = _rows(runner)
            assert [r for r in after if r[0] != "order-0"] == [
                r for r in before if r[0] != "order-0"
            ]
            assert ("order-0", 4, "Returned") in after
        with ProjectionRunner(store, [_tally("fresh-tallies")]) as fresh:
            fresh.catch_up()  # a projection made after the run: from the archive, then the store
            assert _rows(fresh) == after

    from eventcraft.projections.archive_files import ArchiveFiles

    archived = list(ArchiveFiles(archive).read())
    assert [e.position for e in archived] == list(range(1, head + 1))


def test_a_run_stops_at_the_checkpoint_of_a_projection_behind_the_head(
    sqlite_url: str, tmp_path: Path
) -> None:
    with EventStore.open(sqlite_url) as store:
        _history(store)
        planned = retention.plan(
            store, POLICIES, [], str(tmp_path / "a"), checkpoints={"slow": 8, "fast": 20}
        )
        assert (planned.up_to, planned.held_by) == (8, "slow")
        assert [r.events for r in planned.removals] == [6, 0]  # the old events of order-0..2
        report = retention.apply(
            store, POLICIES, [], str(tmp_path / "a"), checkpoints={"slow": 8, "fast": 20}
        )
        assert (report.run.up_to, report.archived) == (8, 8)
        # A second run extends the archive from where the first left it.
        second = retention.apply(store, POLICIES, [], str(tmp_path / "a"))
        assert (second.run.up_to, second.archived, second.plan.archived_to) == (29, 21, 8)
        assert second.run.removed == 4 + 7  # order-3 and -4, then audit-1


def test_retention_needs_rules_and_a_matching_archive(sqlite_url: str, tmp_path: Path) -> None:
    from eventcraft.operations.errors import InputError

    with EventStore.open(sqlite_url) as store:
        _history(store)
        with pytest.raises(InputError, match="needs a policy"):
            retention.plan(store, [], [], str(tmp_path / "a"))
        retention.apply(store, POLICIES, [], str(tmp_path / "a"))
    with EventStore.open(f"sqlite:///{tmp_path / 'other.db'}") as other:
        other.append("order-1", [NewEvent("Placed", {})])
        with pytest.raises(InputError, match="not this store's archive"):
            retention.plan(other, POLICIES, [], str(tmp_path / "a"))


def test_an_archive_that_does_not_reach_the_mark_is_refused(
    sqlite_url: str, tmp_path: Path
) -> None:
    from eventcraft.operations.errors import InputError

    with EventStore.open(sqlite_url) as store:
        _history(store)
        retention.apply(store, POLICIES, [], str(tmp_path / "a"))
        with pytest.raises(InputError, match="give the archive the last run wrote"):
            retention.plan(store, POLICIES, [], str(tmp_path / "elsewhere"))


def test_appends_in_another_process_go_on_while_a_run_removes(pg_url: str, tmp_path: Path) -> None:
    from .retention_workers import keep_appending

    old = datetime.now(UTC) - timedelta(days=40)
    with EventStore.open(pg_url) as store:
        for n in range(20):
            store.append(
                f"order-{n}", [NewEvent("Placed", {"i": i}, recorded_at=old) for i in range(200)]
            )
        started, stop = PROCESSES.Event(), PROCESSES.Event()
        writer = PROCESSES.Process(target=keep_appending, args=(pg_url, "ticks-1", started, stop))
        writer.start()
        try:
            assert started.wait(60), "the writer did not start"
            policy = [RetentionPolicy("order", max_age=timedelta(days=30))]
            at_start = store.stream_version("ticks-1")
            report = retention.apply(store, policy, [], str(tmp_path / "a"), pace=0.5)
            before_stop = store.stream_version("ticks-1")
            assert before_stop > at_start  # it appended while the run archived and removed
        finally:
            stop.set()
            writer.join(60)
        assert writer.exitcode == 0  # no append refused or lost its answer meanwhile
        assert report.run.removed == 20 * 199
        ticks = [e.version for e in store.read_stream("ticks-1")]
        assert ticks == list(range(1, len(ticks) + 1)) and len(ticks) >= before_stop > 0
        positions = [e.position for e in store.read_all(after=report.run.up_to)]
        assert positions == sorted(positions) and len(positions) == len(set(positions))


def test_a_stream_whose_first_events_were_removed_is_no_new_stream(
    shared_store_url: str, tmp_path: Path
) -> None:
    """After retention removed order-0's first two events (its newest stays), an append
    expecting no stream is refused, as one expecting an older version is: on PostgreSQL it
    took version 1 again, which the unique index no longer held."""
    from eventcraft.eventstore import NO_STREAM, WrongExpectedVersion

    with EventStore.open(shared_store_url) as store:
        _history(store)
        retention.apply(store, POLICIES, [], str(tmp_path / "a"))
        assert [e.version for e in store.read_stream("order-0")] == [3]
        for expected in (NO_STREAM, 0, 1):
            with pytest.raises(WrongExpectedVersion) as refused:
                store.append("order-0", [NewEvent("Placed", {})], expected)
            assert refused.value.actual == 3
        assert [e.version for e in store.read_stream("order-0")] == [3]


def test_a_batch_retried_after_retention_removed_part_of_it_is_refused_not_appended(
    shared_store_url: str, tmp_path: Path
) -> None:
    """Idempotency reaches what the store holds: a retry of order-0's batch, whose first
    two events a run removed, is refused naming retention, and writes nothing."""
    from eventcraft.eventstore import DuplicateEventId

    with EventStore.open(shared_store_url) as store:
        _history(store)
        original = list(store.read_stream("order-0"))
        retention.apply(store, POLICIES, [], str(tmp_path / "a"))
        head = store.high_water_mark()
        archived = {e.version: e.id for e in original}
        batch = [NewEvent(e.type, e.data, id=archived[e.version]) for e in original]
        with pytest.raises(DuplicateEventId, match="removed by retention"):
            store.append("order-0", batch)
        assert store.high_water_mark() == head


def test_rules_on_the_sagas_streams_are_refused_before_anything_is_written(
    sqlite_url: str, tmp_path: Path
) -> None:
    """A saga instance folds its state from its whole stream: cutting its start would
    resume a running instance without its input. Finished ones go once deleted."""
    from eventcraft.operations.errors import InputError

    archive = tmp_path / "archive"
    with EventStore.open(sqlite_url) as store:
        store.append("saga-checkout:o1", [NewEvent("SagaStarted", {}), NewEvent("StepStarted", {})])
        for policies, truncations in (
            ([RetentionPolicy("saga", max_count=1)], []),
            ([], [Truncation("saga-checkout:o1", 2)]),
        ):
            with pytest.raises(InputError, match="saga instances rebuild their state"):
                retention.plan(store, policies, truncations, str(archive))
            with pytest.raises(InputError, match="retention never cuts the 'saga' category"):
                retention.apply(store, policies, truncations, str(archive))
        assert not archive.exists() and store.low_water_mark() == 0
        store.delete_stream("saga-checkout:o1")
        done = retention.apply(store, [RetentionPolicy("order", max_count=1)], [], str(archive))
        assert done.run.removed == 1  # the deleted instance's events but its newest
