"""Retention and deleted streams: a run archives a deleted stream's events with the rest of
the log, then removes all but its newest, which stays hidden so that its versions and the
log's positions go on; a projection rebuilt after the run equals one built before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from eventcraft.eventstore import EventStore, NewEvent, StreamTombstoned
from eventcraft.eventstore.retention import DELETED_RULE, RetentionPolicy
from eventcraft.projections import Fold, ProjectionRunner
from eventcraft.projections.archive_files import ArchiveFiles

from eventcraft.operations import retention

metadata = sa.MetaData()
counts = sa.Table(
    "stream_counts",
    metadata,
    sa.Column("stream", sa.Text, primary_key=True),
    sa.Column("events", sa.Integer, nullable=False),
)


def _counting(name: str) -> Fold:
    return Fold(
        name,
        table=counts,
        key=lambda event: event.stream_id,
        initial=lambda key: {"stream": key, "events": 0},
        apply=lambda state, event: {**state, "events": state["events"] + 1},
    )


def _rows(runner: ProjectionRunner) -> list[tuple[Any, ...]]:
    with runner.database.reading() as connection:
        return [tuple(r) for r in connection.execute(sa.select(counts).order_by("stream"))]


POLICIES = [RetentionPolicy("audit", max_count=100)]  # removes nothing: a run needs a rule


@pytest.mark.parametrize("shared_store_url", ["sqlite", "postgres"], indirect=True)
def test_a_run_archives_then_removes_the_events_of_deleted_streams(
    shared_store_url: str, tmp_path: Path
) -> None:
    archive = str(tmp_path / "archive")
    with EventStore.open(shared_store_url) as store:
        store.append("order-1", [NewEvent("Placed", {"n": n}) for n in range(4)])
        store.append("order-2", [NewEvent("Placed", {"n": n}) for n in range(3)])
        store.append("order-3", [NewEvent("Placed", {})])
        store.append("audit-1", [NewEvent("Seen", {})])
        store.delete_stream("order-1", expected_version=4)
        store.delete_stream("order-2", tombstone=True)
        head = store.high_water_mark()
        with ProjectionRunner(store, [_counting("counts")]) as runner:
            runner.catch_up()
            before = _rows(runner)
            assert ("order-1", 4) in before  # a projection reads the log, deletions or not

            planned = retention.plan(store, POLICIES, [], archive)
            assert [(r.rule, r.events) for r in planned.removals] == [
                (POLICIES[0].category + ": beyond the newest 100 of a stream", 0),
                (DELETED_RULE, 5),
            ]
            report = retention.apply(store, POLICIES, [], archive)
            assert (report.archived, report.run.removed, report.run.up_to) == (head, 5, head)
            assert DELETED_RULE in report.run.rules

            # The archive holds every event, the store each deleted stream's newest only.
            archived = list(ArchiveFiles(archive).read())
            assert [e.position for e in archived] == list(range(1, head + 1))
            stored = [(e.stream_id, e.version) for e in store.read_all()]
            assert stored == [("order-1", 4), ("order-2", 3), ("order-3", 1), ("audit-1", 1)]

            # Reads still show the deleted streams as absent; versions go on after them.
            assert list(store.read_stream("order-1")) == []
            result = store.append("order-1", [NewEvent("Placed", {})], expected_version=0)
            assert (result.version, result.positions) == (5, (head + 1,))
            with pytest.raises(StreamTombstoned):
                store.append("order-2", [NewEvent("Placed", {})])

            runner.catch_up()
            runner.rebuild("counts")
            after = _rows(runner)
            assert after == [("order-1", 5) if row[0] == "order-1" else row for row in before]


@pytest.mark.parametrize("shared_store_url", ["sqlite", "postgres"], indirect=True)
def test_a_run_removes_the_snapshots_of_deleted_streams(
    shared_store_url: str, tmp_path: Path
) -> None:
    import sqlalchemy as sa

    with EventStore.open(shared_store_url) as store:
        store.append("customer-1", [NewEvent("Registered", {}), NewEvent("Moved", {})])
        store.save_snapshot("customer-1", version=2, type="customer", data={"city": "London"})
        store.append("customer-2", [NewEvent("Registered", {})])
        store.save_snapshot("customer-2", version=1, type="customer", data={"city": "Paris"})
        store.delete_stream("customer-1", 2, tombstone=True)
        retention.apply(store, POLICIES, [], str(tmp_path / "archive"))
    engine = sa.create_engine(_sqlalchemy_url(shared_store_url))
    try:
        with engine.connect() as connection:
            rows = connection.execute(sa.text("SELECT stream_id FROM eventcraft_snapshots"))
            assert [row[0] for row in rows] == ["customer-2"]
    finally:
        engine.dispose()


def _sqlalchemy_url(url: str) -> str:
    if url.startswith("sqlite"):
        return url
    base, schema = url.split("?schema=")
    return (
        f"{base.replace('postgresql://', 'postgresql+psycopg://')}?options=-csearch_path%3D{schema}"
    )
