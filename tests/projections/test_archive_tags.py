"""Events' tags in the Parquet archive and through retention: an archive keeps them however
its segment was written, one written before tags reads as untagged events, and a retention
run removes the tag rows of the events it removes, so that queries and append conditions
no longer find them."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from eventcraft.eventstore import (
    AppendCondition,
    EventStore,
    NewEvent,
    Query,
    QueryItem,
    segment_name,
)
from eventcraft.eventstore.retention import RetentionPolicy
from eventcraft.projections.archive_files import ArchiveFiles
from eventcraft.projections.log_batches import EVENT_SCHEMA, to_batch

from eventcraft.operations import retention

TAGS = [("course:c1", "student:s1"), (), ("course:c2",)]


def _tagged(store: EventStore) -> None:
    for n, tags in enumerate(TAGS):
        store.append(f"enrolment-{n}", [NewEvent("Enrolled", {"n": n}, tags=tags)])


@pytest.mark.parametrize("written_from", ["decoded", "encoded"])
def test_an_archive_keeps_the_events_tags(tmp_path: Path, written_from: str) -> None:
    with EventStore.open("memory://") as store:
        _tagged(store)
        events = list(store.read_all())
        given = events if written_from == "decoded" else list(store.read_all_encoded())
    archive = ArchiveFiles(tmp_path / "archive")
    archive.write_segment(1, len(TAGS), given)
    assert list(archive.read()) == events
    assert [e.tags for e in archive.read()] == TAGS


def test_an_archive_written_before_tags_reads_as_untagged_events(tmp_path: Path) -> None:
    with EventStore.open("memory://") as store:
        _tagged(store)
        events = list(store.read_all())
    old_schema = pa.schema([field for field in EVENT_SCHEMA if field.name != "tags"])
    segment = tmp_path / "archive" / segment_name(1, len(events))
    segment.mkdir(parents=True)
    pq.write_table(
        pa.Table.from_batches([to_batch(events)]).select(old_schema.names).cast(old_schema),
        segment / "part-00000.parquet",
    )
    (segment / "_SUCCESS").touch()
    read = list(ArchiveFiles(tmp_path / "archive").read())
    assert [e.tags for e in read] == [()] * len(events)
    assert [(e.id, e.data) for e in read] == [(e.id, e.data) for e in events]


def _tag_rows(url: str) -> list[tuple[str, int]]:
    query = "SELECT tag, position FROM eventcraft_tags ORDER BY position, tag"
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            return [tuple(row) for row in conn.execute(query)]
    base, schema = url.split("?schema=")
    with psycopg.connect(base, options=f"-c search_path={schema}") as conn:
        return [tuple(row) for row in conn.execute(query)]


def test_a_retention_run_removes_the_tag_rows_of_the_events_it_removes(
    shared_store_url: str, tmp_path: Path
) -> None:
    url = shared_store_url
    old = datetime.now(UTC) - timedelta(days=40)
    with EventStore.open(url) as store:
        for n in (1, 2):
            store.append(
                f"course-c{n}",
                [
                    NewEvent("Defined", {}, recorded_at=old, tags=[f"course:c{n}"]),
                    NewEvent("Renamed", {}, recorded_at=old, tags=[f"course:c{n}", "x:y"]),
                    NewEvent("Opened", {}, tags=[f"course:c{n}"]),
                ],
            )
        assert len(_tag_rows(url)) == 8
        policies = [RetentionPolicy("course", max_age=timedelta(days=30))]
        report = retention.apply(store, policies, [], str(tmp_path / "archive"), checkpoints={})
        assert report.run.removed == 4
        assert _tag_rows(url) == [("course:c1", 3), ("course:c2", 6)]
        c1 = Query([QueryItem(tags=["course:c1"])])
        assert [e.type for e in store.read_query(c1).events] == ["Opened"]
        assert store.read_query(Query([QueryItem(tags=["x:y"])])).events == []
        # A name no kept event carries is free again for a decision that wants none.
        nobody = AppendCondition(Query([QueryItem(tags=["x:y"])]), after=None)
        store.append("course-c3", [NewEvent("Defined", {}, tags=["x:y"])], condition=nobody)
    archived = list(ArchiveFiles(tmp_path / "archive").read())
    assert [e.tags for e in archived] == [
        ("course:c1",),
        ("course:c1", "x:y"),
        ("course:c1",),
        ("course:c2",),
        ("course:c2", "x:y"),
        ("course:c2",),
    ]
