"""Personal fields in Spark: the archive keeps them sealed, so forgetting a customer
forgets it there too; a replay (a Python fold and a reducer fold, from the store and from
the archive) and `read_events` open them, and after a forget read the replacement where
the in-process runner does. On SQLite (Python workers) and PostgreSQL (the JDBC source)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sqlalchemy as sa
from eventcraft.eventstore import FORGOTTEN, SEALED_MARK, EventStore
from eventcraft.projections import ProjectionRunner

from tests.projections.customers import (
    PLAIN,
    customer_last_names,
    customer_names,
    last_names,
    names,
    registrations,
)


def _rows(runner: ProjectionRunner, table: sa.Table) -> list[tuple[Any, ...]]:
    with runner.database.reading() as connection:
        query = sa.select(table).order_by(table.c.customer)
        return [tuple(row) for row in connection.execute(query)]


def _archived_texts(path: Path) -> str:
    """Every value of every archived row, as text: what a thief of the archive reads."""
    texts = []
    for part in path.rglob("*.parquet"):
        for row in pq.read_table(part).to_pylist():
            texts.append(repr(row))
    return "\n".join(texts)


def test_the_archive_stays_sealed_and_replays_read_what_the_runner_reads(
    spark: Any, shared_store_url: str, tmp_path: Path
) -> None:
    from eventcraft.projections.spark import Archive, read_events, replay

    url = shared_store_url
    archive = Archive(str(tmp_path / "archive"))
    with EventStore.open(url) as store:
        for stream_id, events in registrations().items():
            store.append(stream_id, events)
        assert archive.export(spark, url).events == 4
        archived = _archived_texts(tmp_path / "archive")
        assert archived.count(SEALED_MARK) == 4
        for who in PLAIN:
            for text in PLAIN[who]:
                assert text not in archived

        with ProjectionRunner(store, [customer_names, customer_last_names]) as runner:
            report = replay(customer_names, url, spark=spark)
            # The JVM reads a PostgreSQL store; Python workers read SQLite's.
            assert report.read_path == ("jdbc" if url.startswith("postgresql") else "python")
            replay(customer_last_names, url, spark=spark)
            assert _rows(runner, names) == [
                ("ada", "Ada Lovelace Jr", "ada@analytical.example", "silver"),
                ("bob", "Bob Dylan Jr", "bob@x.ex", "silver"),
            ]
            assert _rows(runner, last_names) == [
                ("ada", "Ada Lovelace Jr", 2),
                ("bob", "Bob Dylan Jr", 2),
            ]

            store.forget("customer-ada")
            runner.rebuild(customer_names.name)
            runner.rebuild(customer_last_names.name)
            in_process = _rows(runner, names), _rows(runner, last_names)
            assert in_process[0][0] == ("ada", FORGOTTEN, FORGOTTEN, "silver")
            assert in_process[1] == [("ada", FORGOTTEN, 2), ("bob", "Bob Dylan Jr", 2)]
            for source in (None, archive):
                replay(customer_names, url, spark=spark, source=source)
                replay(customer_last_names, url, spark=spark, source=source)
                assert (_rows(runner, names), _rows(runner, last_names)) == in_process

        for frame in (read_events(spark, url), read_events(spark, archive, keys=url)):
            data = sorted(row.data for row in frame.select("data").collect())
            assert not any(SEALED_MARK in text for text in data)
            assert sum('"Bob Dylan Jr"' in text for text in data) == 1
            assert not any("Ada Lovelace" in text for text in data)


def test_an_archive_read_without_its_key_store_refuses_sealed_events(
    spark: Any, sqlite_url: str, tmp_path: Path
) -> None:
    from eventcraft.projections.spark import Archive, read_events

    archive = Archive(str(tmp_path / "archive"))
    with EventStore.open(sqlite_url) as store:
        for stream_id, events in registrations().items():
            store.append(stream_id, events)
    archive.export(spark, sqlite_url)
    with pytest.raises(Exception, match="cannot open without a key store"):
        read_events(spark, archive).collect()


def test_a_worker_that_opened_a_subject_reads_it_forgotten_in_its_next_job(
    sqlite_url: str,
) -> None:
    """Spark reuses its Python workers from job to job: a replay started after a forget
    must not open the subject with a key the worker kept from the job before (CI once
    replayed a forgotten name so)."""
    from eventcraft.projections.spark.personal import _open_column

    with EventStore.open(sqlite_url) as store:
        for stream_id, events in registrations().items():
            store.append(stream_id, events)
        with sa.create_engine(sqlite_url).connect() as connection:
            rows = connection.execute(
                sa.text("select position, data from eventcraft_events order by position")
            ).all()
        positions = pa.array([row.position for row in rows], pa.int64())
        sealed = pa.array([row.data for row in rows], pa.string())
        assert "Ada Lovelace" in "".join(_open_column(sqlite_url, sealed, positions).to_pylist())
        store.forget("customer-ada")
        opened = "".join(_open_column(sqlite_url, sealed, positions).to_pylist())
        assert "Ada Lovelace" not in opened
        assert "Bob Dylan" in opened


def test_a_replay_refuses_a_key_store_file_that_is_not_there_and_makes_none(
    tmp_path: Path,
) -> None:
    from eventcraft.eventstore import StoreUnavailable
    from eventcraft.projections.spark.personal import opened

    typo = tmp_path / "typo" / "keys.db"
    with pytest.raises(StoreUnavailable, match="there is no file"):
        opened(object(), f"sqlite:///{typo}")  # type: ignore[arg-type]  # refused first
    assert not typo.parent.exists()


def test_sealed_events_meeting_a_key_store_without_keys_fail_naming_it(
    spark: Any, sqlite_url: str, tmp_path: Path
) -> None:
    from eventcraft.eventstore import NewEvent
    from eventcraft.projections.spark.personal import opened

    with EventStore.open(sqlite_url) as store:
        for stream_id, events in registrations().items():
            store.append(stream_id, events)
        with sa.create_engine(sqlite_url).connect() as connection:
            rows = connection.execute(sa.text("select position, data from eventcraft_events"))
            logged = [(row.position, row.data) for row in rows]
    assert any(SEALED_MARK in data for _, data in logged)
    wrong = f"sqlite:///{tmp_path / 'other.db'}"
    with EventStore.open(wrong) as other:  # a store of its own, that never sealed anything
        other.append("order-1", [NewEvent("Placed", {"total": 1})])
    events = spark.createDataFrame(logged, "position long, data string")
    with pytest.raises(Exception, match="holds no keys"):
        opened(events, wrong).collect()
