"""Retention on a PostgreSQL store whose events are partitioned by position (partitions
of 10, `eventstore/postgres/partitions.py`): a run archives the log up to its mark and
replaces each partition wholly below the mark by a table of the rows it keeps, instead
of deleting rows, so that no dead row stays behind (`postgres/partition_retention.py`). Nothing
below the mark is lost: the archive up to it followed by the store after it is the whole
log, and a projection rebuilt after the run reads it so."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import psycopg
import pytest
from eventcraft.eventstore import EventStore, NewEvent
from eventcraft.eventstore.retention import RetentionPolicy
from eventcraft.projections import ArchiveFiles, ProjectionRunner

from eventcraft.operations import retention

from ..conftest import PG_URL
from .test_retention import _rows, _tally


def test_a_run_on_a_partitioned_store_loses_nothing_below_the_mark(
    pg_url: str, tmp_path: Path
) -> None:
    archive = str(tmp_path / "archive")
    old = datetime.now(UTC) - timedelta(days=40)
    with EventStore.open(f"{pg_url}&partition_events=10") as store:
        for n in range(6):  # 7 events a stream: streams straddle partitions' bounds
            store.append(
                f"order-{n}",
                [
                    NewEvent("Placed", {"n": n, "i": i, "pad": _pad()}, recorded_at=old)
                    for i in range(6)
                ]
                + [NewEvent("Shipped", {"n": n})],
            )
        whole = [(e.position, e.id, e.stream_id, e.version) for e in store.read_all()]
        head = store.high_water_mark()
        sizes = _sizes(pg_url)
        with ProjectionRunner(store, [_tally("tallies")]) as runner:
            runner.catch_up()
            before = _rows(runner)
            report = retention.apply(
                store, [RetentionPolicy("order", max_age=timedelta(days=30))], [], archive
            )
            assert (report.run.up_to, report.run.removed) == (head, 36)
            assert store.low_water_mark() == head
            kept = [(e.position, e.id, e.stream_id, e.version) for e in store.read_all()]
            assert [version for *_, version in kept] == [7] * 6  # each stream's newest stays
            assert {f"order-{n}": store.stream_version(f"order-{n}") for n in range(6)} == {
                f"order-{n}": 7 for n in range(6)
            }
            archived = [
                (e.position, e.id, e.stream_id, e.version) for e in ArchiveFiles(archive).read()
            ]
            assert archived == whole  # up to the mark, which is the head here
            # Partitions [0, 40) are wholly below the mark: each a new, smaller table
            # holding its kept rows alone; [40, 50), which the log goes on in, stays.
            after_run = _sizes(pg_url)
            assert set(after_run) == set(sizes)
            for k in range(4):
                assert after_run[k][0] != sizes[k][0]
                assert after_run[k][1] < sizes[k][1]
            assert after_run[4] == sizes[4]
            # The log goes on in its partitions, versions and positions never used again.
            assert store.append("order-0", [NewEvent("Returned", {})]).positions == (head + 1,)
            runner.rebuild("tallies")  # from the archive, then the store
            after = _rows(runner)
        assert [r for r in after if r[0] != "order-0"] == [r for r in before if r[0] != "order-0"]
        assert ("order-0", 8, "Returned") in after


def _pad() -> str:
    """A kilobyte that does not compress: a partition of ten such events fills pages."""
    return secrets.token_hex(512)


def _sizes(pg_url: str) -> dict[int, tuple[int, int]]:
    """Each partition's number: its table's oid and its heap's size in bytes."""
    schema = parse_qs(urlsplit(pg_url).query)["schema"][0]
    with psycopg.connect(PG_URL) as conn:
        rows = conn.execute(
            "SELECT c.relname, c.oid::bigint, pg_relation_size(c.oid) FROM pg_inherits i "
            "JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = %s::regclass",
            (f"{schema}.eventcraft_events",),
        ).fetchall()
    return {int(str(name).rsplit("_p", 1)[1]): (int(oid), int(size)) for name, oid, size in rows}


@pytest.mark.slow
def test_a_reader_holding_the_events_table_leaves_partitions_whole_and_the_run_goes_on(
    pg_url: str, tmp_path: Path
) -> None:
    """A swap waits at most `SWAP_LOCK_TIMEOUT` for its lock: behind a reader's open
    transaction the run deletes rows as on any store and leaves the partitions for the
    next run, which replaces them (dropping one that keeps nothing)."""
    old = datetime.now(UTC) - timedelta(days=40)
    rule = [RetentionPolicy("order", max_age=timedelta(days=30))]
    with EventStore.open(f"{pg_url}&partition_events=10") as store:
        # A first run makes retention's triggers, which waits for readers: before the one.
        retention.apply(store, rule, [], str(tmp_path / "a"))
        for n in range(3):
            store.append(
                f"order-{n}",
                [NewEvent("Placed", {"i": i}, recorded_at=old) for i in range(9)]
                + [NewEvent("Shipped", {})],
            )
        sizes = _sizes(pg_url)
        schema = parse_qs(urlsplit(pg_url).query)["schema"][0]
        with psycopg.connect(PG_URL) as reader:
            reader.execute(f"SELECT count(*) FROM {schema}.eventcraft_events").fetchone()
            report = retention.apply(store, rule, [], str(tmp_path / "a"))
        assert report.run.removed == 27
        assert {k: oid for k, (oid, _) in _sizes(pg_url).items()} == {
            k: oid for k, (oid, _) in sizes.items()
        }
        assert [e.version for e in store.read_all()] == [10, 10, 10]  # rows removed
        store.append("order-9", [NewEvent("Placed", {}) for _ in range(10)])
        retention.apply(store, rule, [], str(tmp_path / "a"))  # nothing to remove, replaces
        compacted = _sizes(pg_url)
        # [0, 10) held only removed events: dropped; the next two replaced by their kept rows.
        assert 0 not in compacted
        assert all(compacted[k][0] != sizes[k][0] for k in (1, 2))
        assert [e.version for e in store.read_all()][:3] == [10, 10, 10]
