"""Retention on a PostgreSQL store whose events are partitioned by position (partitions
of 10, `eventstore/postgres/partitions.py`): a run archives the log up to its mark and
removes what its rules name, rows deleted as on any store (retention by whole partition
is planned: docs/how-to/partitioned-log.md). Nothing below the mark is lost: the archive
up to it followed by the store after it is the whole log, and a projection rebuilt after
the run reads it so."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from eventcraft.eventstore import EventStore, NewEvent
from eventcraft.eventstore.retention import RetentionPolicy
from eventcraft.projections import ArchiveFiles, ProjectionRunner

from eventcraft.operations import retention

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
                [NewEvent("Placed", {"n": n, "i": i}, recorded_at=old) for i in range(6)]
                + [NewEvent("Shipped", {"n": n})],
            )
        whole = [(e.position, e.id, e.stream_id, e.version) for e in store.read_all()]
        head = store.high_water_mark()
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
            # The log goes on in its partitions, versions and positions never used again.
            assert store.append("order-0", [NewEvent("Returned", {})]).positions == (head + 1,)
            runner.rebuild("tallies")  # from the archive, then the store
            after = _rows(runner)
        assert [r for r in after if r[0] != "order-0"] == [r for r in before if r[0] != "order-0"]
        assert ("order-0", 8, "Returned") in after
