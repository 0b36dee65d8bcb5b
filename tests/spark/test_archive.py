"""The Parquet archive: extended by each export, read as one log, refused when it is not one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from eventcraft.eventstore import EventStore
from pyspark.sql.functions import unix_micros

from examples.bank import bank_events

from .histories import append

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
HISTORY = [[(n % 5, kind, 100 + n)] for n, kind in enumerate(["open", "deposit_v1", "deposit"] * 8)]


def ids(frame: Any) -> list[tuple[int, str]]:
    return [(row.position, row.id) for row in frame.select("position", "id").collect()]


def test_exports_extend_the_archive_with_what_the_store_added_since(
    spark: Any, shared_store_url: str, tmp_path: Path
) -> None:
    from eventcraft.projections.spark import Archive, read_events

    archive = Archive(str(tmp_path / "archive"))
    with EventStore.open(shared_store_url) as store:
        assert archive.export(spark, shared_store_url).events == 0
        append(store, HISTORY)
        first = archive.export(spark, shared_store_url)
        assert (first.after, first.upto, first.events) == (0, 24, 24)
        assert archive.export(spark, shared_store_url).events == 0  # nothing new
        append(store, HISTORY[:5])
        second = archive.export(spark, shared_store_url)
        assert (second.after, second.upto, second.events) == (24, 29, 5)
        assert [(s.first, s.last) for s in archive.segments(spark)] == [(1, 24), (25, 29)]
        archived = sorted(ids(read_events(spark, archive)))
        assert archived == [(e.position, str(e.id)) for e in store.read_all()]
        assert sorted(ids(read_events(spark, shared_store_url))) == archived
        micros = read_events(spark, archive).select("position", unix_micros("recorded_at"))
        assert sorted(map(tuple, micros.collect())) == [
            (e.position, (e.recorded_at - EPOCH) // timedelta(microseconds=1))
            for e in store.read_all()
        ]
    segment = archive.segments(spark)[0].path.removeprefix("file:")
    (part, *_) = Path(segment).glob("*.parquet")
    assert pq.read_schema(part).field("recorded_at").type == pa.timestamp("us", tz="UTC")


def test_a_segment_a_crashed_export_left_is_ignored_then_replaced(
    spark: Any, sqlite_url: str, tmp_path: Path
) -> None:
    from eventcraft.projections.spark import Archive

    archive = Archive(str(tmp_path / "archive"))
    with EventStore.open(sqlite_url) as store:
        append(store, HISTORY)
    half_written = tmp_path / "archive" / f"from-{1:015d}-to-{10:015d}"
    half_written.mkdir(parents=True)
    (half_written / "part-00000.parquet").write_bytes(b"not parquet: no _SUCCESS marker")
    assert archive.last_position(spark) == 0
    assert archive.export(spark, sqlite_url).events == 24
    assert not half_written.exists()
    assert [(s.first, s.last) for s in archive.segments(spark)] == [(1, 24)]


def test_an_archive_that_is_not_one_log_is_refused(
    spark: Any, sqlite_url: str, tmp_path: Path
) -> None:
    from eventcraft.projections.spark import Archive, ArchiveError, replay

    from examples.read_models import account_balances

    archive = Archive(str(tmp_path / "archive"))
    with EventStore.open(sqlite_url) as store:
        append(store, HISTORY)
    archive.export(spark, sqlite_url)
    other_store = f"sqlite:///{tmp_path / 'other.db'}"
    with EventStore.open(other_store) as store:
        append(store, HISTORY[:3])
    with pytest.raises(ArchiveError, match="not an archive of this store"):
        replay(account_balances, other_store, spark=spark, source=archive)
    overlapping = tmp_path / "archive" / f"from-{20:015d}-to-{30:015d}"
    overlapping.mkdir()
    (overlapping / "_SUCCESS").touch()
    with pytest.raises(ArchiveError, match="overlaps the one before"):
        archive.segments(spark)


def test_read_events_gives_registered_types_as_upcast_struct_columns(
    spark: Any, sqlite_url: str
) -> None:
    from eventcraft.projections.spark import read_events

    with EventStore.open(sqlite_url) as store:
        append(store, HISTORY)
        recorded = {e.position: e for e in store.read_all()}
    frame = read_events(spark, sqlite_url, registry=bank_events)
    deposits = frame.where("type = 'MoneyDeposited'").select(
        "position", "category", "version", "MoneyDeposited.amount_cents", "AccountOpened"
    )
    rows = deposits.collect()
    assert len(rows) == 16
    for row in rows:
        event = bank_events.decode(recorded[row.position])  # upcasts v1 as aggregates do
        assert row.amount_cents == event.amount_cents  # type: ignore[attr-defined]
        assert (row.category, row.version, row.AccountOpened) == (
            "account",
            recorded[row.position].version,
            None,
        )
    assert {r.position for r in rows if recorded[r.position].metadata.get("event_version") == 1}
    opened = frame.where("type = 'AccountOpened'").select("AccountOpened.owner").collect()
    owners = [e.data["owner"] for e in recorded.values() if e.type == "AccountOpened"]
    assert sorted(r.owner for r in opened) == sorted(owners) and len(owners) == 8


def test_an_export_stores_the_data_parsed_and_a_mixed_archive_reads_it_alike(
    spark: Any, sqlite_url: str, tmp_path: Path
) -> None:
    from eventcraft.projections.spark import Archive
    from pyspark.sql.functions import to_json

    path = str(tmp_path / "archive")
    with EventStore.open(sqlite_url) as store:
        append(store, HISTORY[:12])
        Archive(path).export(spark, sqlite_url)
        append(store, HISTORY[12:])
        Archive(path, parsed=False).export(spark, sqlite_url)  # half the size, none parsed
        data = {e.position: e.data for e in store.read_all()}
    archive = Archive(path)
    parsed, plain = archive.segments(spark)
    assert (parsed.parsed, plain.parsed) == (True, False)
    stored = pq.read_schema(next(Path(parsed.path.removeprefix("file:")).glob("*.parquet")))
    assert "data_variant" in stored.names
    frame = archive.read(spark, parsed=True).select("position", to_json("data_variant"))
    as_read = {row[0]: orjson.loads(row[1]) for row in frame.collect()}
    assert as_read == data  # the stored variant and the one parsed on reading alike
    assert "data_variant" not in archive.read(spark).columns
