"""Events' tags in Spark: the log's DataFrame has a `tags` column from every source (SQLite
and PostgreSQL stores, by either read path, and the archive, whoever wrote its segments),
and a replayed fold sees the tags the in-process runner sees."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sqlalchemy as sa
from eventcraft.eventstore import EventStore, NewEvent
from eventcraft.projections import Fold, ProjectionRunner

from tests.conftest import missing

TAGS = [("course:c1", "student:s1"), (), ("course:c1", "student:s2"), ("course:c2",)]


def _tagged(store: EventStore) -> None:
    for n, tags in enumerate(TAGS):
        store.append(f"enrolment-{n}", [NewEvent("Enrolled", {"n": n}, tags=tags)])
    store.append("odd-1", [NewEvent("Odd", {}, tags=["a,b", 'q"x\\', "{c} d"])])


def _tags_by_position(frame: Any) -> list[tuple[int, tuple[str, ...]]]:
    rows = frame.select("position", "tags").orderBy("position").collect()
    return [(row.position, tuple(row.tags)) for row in rows]


def _stored(store: EventStore) -> list[tuple[int, tuple[str, ...]]]:
    return [(e.position, e.tags) for e in store.read_all()]


@pytest.mark.parametrize(
    ("shared_store_url", "path"),
    [("sqlite", "python"), ("postgres", "python"), ("postgres", "jdbc")],
    indirect=["shared_store_url"],
)
def test_read_events_has_the_tags_of_every_event(
    spark: Any, shared_store_url: str, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from eventcraft.projections.spark import read_events
    from eventcraft.projections.spark import source as spark_source
    from eventcraft.projections.spark.jdbc import POSTGRES_JAR, PYTHON, read_path

    url = shared_store_url
    if path == "python":
        monkeypatch.setattr(spark_source, "read_path", lambda spark, url: PYTHON)
    elif not os.path.isfile(POSTGRES_JAR):
        missing(f"no PostgreSQL JDBC driver at {POSTGRES_JAR}: `make services` installs it")
    else:
        assert read_path(spark, url) == "jdbc"
    with EventStore.open(url) as store:
        _tagged(store)
        stored = _stored(store)
    frame = read_events(spark, url)
    assert dict(frame.dtypes)["tags"] == "array<string>"
    assert _tags_by_position(frame) == stored


def test_an_archive_has_the_tags_and_one_written_before_tags_reads_them_empty(
    spark: Any, sqlite_url: str, tmp_path: Path
) -> None:
    from eventcraft.eventstore import segment_name
    from eventcraft.projections.archive_files import ArchiveFiles
    from eventcraft.projections.log_batches import EVENT_SCHEMA, to_batch
    from eventcraft.projections.spark import Archive, read_events

    with EventStore.open(sqlite_url) as store:
        _tagged(store)
        events = list(store.read_all())
    # Positions 1-2 as a release before tags wrote them; the rest exported by Spark.
    old_schema = pa.schema([field for field in EVENT_SCHEMA if field.name != "tags"])
    segment = tmp_path / "archive" / segment_name(1, 2)
    segment.mkdir(parents=True)
    old = pa.Table.from_batches([to_batch(events[:2])]).select(old_schema.names)
    pq.write_table(old.cast(old_schema), segment / "part-00000.parquet")
    (segment / "_SUCCESS").touch()
    archive = Archive(str(tmp_path / "archive"))
    assert archive.export(spark, sqlite_url).events == len(events) - 2
    expected = [(e.position, () if e.position <= 2 else e.tags) for e in events]
    assert _tags_by_position(read_events(spark, archive)) == expected
    # The segment Spark wrote reads the same without Spark.
    assert [(e.position, e.tags) for e in ArchiveFiles(tmp_path / "archive").read()] == expected


_metadata = sa.MetaData()
_per_course = sa.Table(
    "enrolments_per_course",
    _metadata,
    sa.Column("course", sa.Text, primary_key=True),
    sa.Column("students", sa.Integer, nullable=False),
)


def _course(event: Any) -> str | None:
    return next((tag for tag in event.tags if tag.startswith("course:")), None)


per_course = Fold(
    "per-course",
    table=_per_course,
    key=_course,
    initial=lambda key: {"course": key, "students": 0},
    apply=lambda state, event: {
        **state,
        "students": state["students"] + sum(t.startswith("student:") for t in event.tags),
    },
    types=["Enrolled"],
)


def test_a_replayed_fold_keys_and_folds_by_tags_as_the_runner_does(
    spark: Any, sqlite_url: str
) -> None:
    from eventcraft.projections.spark import replay

    with EventStore.open(sqlite_url) as store:
        _tagged(store)
        replay(per_course, sqlite_url, spark=spark)
        with ProjectionRunner(store, [per_course]) as runner:
            with runner.database.reading() as connection:
                replayed = sorted(map(tuple, connection.execute(sa.select(_per_course))))
            runner.rebuild(per_course.name)
            with runner.database.reading() as connection:
                rebuilt = sorted(map(tuple, connection.execute(sa.select(_per_course))))
    assert replayed == rebuilt == [("course:c1", 2), ("course:c2", 0)]
