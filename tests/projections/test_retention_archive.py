"""Reading below the low-water mark: a projection, a rebuild or a retried parked event takes
what retention removed from the archive, never skips it, and says so when the archive is
not there; and one retention run at a time writes an archive."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from eventcraft.eventstore import EventStore, NewEvent
from eventcraft.eventstore.retention import RetentionPolicy
from eventcraft.projections import ErrorPolicy, Fold, Projection, ProjectionRunner
from eventcraft.projections.archive_files import ArchiveBroken, ArchiveFiles

from eventcraft.operations import retention
from eventcraft.operations.errors import InputError, Problems

from ..processes import PROCESSES

metadata = sa.MetaData()
sums = sa.Table(
    "paid_sums",
    metadata,
    sa.Column("k", sa.Text, primary_key=True),
    sa.Column("n", sa.Integer, nullable=False),
)
ORDERS = [RetentionPolicy("order", max_count=1)]


def _summing(name: str) -> Fold:
    return Fold(
        name,
        table=sums,
        types=["Paid"],
        key=lambda event: "all",
        initial=lambda key: {"k": key, "n": 0},
        apply=lambda row, event: {**row, "n": row["n"] + event.data["cents"]},
    )


def _sum(runner: ProjectionRunner) -> Any:
    with runner.database.reading() as connection:
        return connection.execute(sa.select(sums.c.n)).scalar()


def _paid(store: EventStore, streams: range, each: int = 5) -> None:
    for s in streams:
        store.append(f"order-{s}", [NewEvent("Paid", {"cents": 1}) for _ in range(each)])


def test_a_rebuild_without_the_archive_folder_raises_rather_than_skip_what_it_holds(
    sqlite_url: str, tmp_path: Path
) -> None:
    archive = tmp_path / "archive"
    with (
        EventStore.open(sqlite_url) as store,
        ProjectionRunner(store, [_summing("sums")]) as runner,
    ):
        _paid(store, range(4))
        runner.catch_up()
        retention.apply(store, ORDERS, [], str(archive))
        runner.rebuild("sums")
        assert _sum(runner) == 20

        archive.rename(tmp_path / "not-mounted")
        with pytest.raises(ArchiveBroken, match=f"{archive} is missing.*low-water mark 20"):
            runner.rebuild("sums")
        assert _sum(runner) == 20  # the read model the failed rebuild left
        with (
            ProjectionRunner(store, [_summing("fresh")]) as fresh,
            pytest.raises(ArchiveBroken, match="is missing"),
        ):
            fresh.catch_up()  # a new projection, too

        # An archive that ends below the mark (an older copy) is no better.
        archive.mkdir()
        shutil.copytree(
            next((tmp_path / "not-mounted").glob("from-*")), archive / "from-000000000000001-to-1"
        )
        with pytest.raises(ArchiveBroken, match="ends at position 1, below the low-water mark 20"):
            runner.rebuild("sums")


def test_a_projection_behind_a_run_it_was_not_told_of_reads_what_it_removed_from_the_archive(
    shared_store_url: str, tmp_path: Path
) -> None:
    with (
        EventStore.open(shared_store_url) as store,
        ProjectionRunner(store, [_summing("sums")]) as runner,
    ):
        _paid(store, range(1), each=1)
        runner.catch_up()  # the runner's store object now knows the mark as 0
        _paid(store, range(1, 4))
        # A run from another process or host, told no checkpoint.
        with EventStore.open(shared_store_url) as other:
            done = retention.apply(other, ORDERS, [], str(tmp_path / "archive"))
        assert (done.run.up_to, done.run.removed) == (16, 12)
        runner.catch_up()
        assert _sum(runner) == 16
        runner.rebuild("sums")
        assert _sum(runner) == 16


def test_retrying_a_parked_event_retention_removed_applies_it_from_the_archive(
    sqlite_url: str, tmp_path: Path
) -> None:
    totals = sa.Table(
        "paid_totals",
        sa.MetaData(),
        sa.Column("k", sa.Text, primary_key=True),
        sa.Column("n", sa.Integer),
    )
    paying = Projection(
        "totals", tables=[totals], on_error=ErrorPolicy(attempts=1, backoff=0, then="skip")
    )
    broken = [True]

    @paying.on("Paid")
    def paid(read_model: Any, event: Any) -> None:
        if broken[0] and event.data["cents"] == 13:
            raise RuntimeError("a bug in the handler")
        table = read_model[totals]
        added = sa.update(table).where(table.c.k == "sum").values(n=table.c.n + event.data["cents"])
        if read_model.execute(added).rowcount == 0:
            read_model.execute(sa.insert(table).values(k="sum", n=event.data["cents"]))

    with EventStore.open(sqlite_url) as store, ProjectionRunner(store, [paying]) as runner:
        store.append("order-1", [NewEvent("Paid", {"cents": c}) for c in (10, 13, 20)])
        runner.catch_up()
        assert [p.position for p in runner.parked("totals")] == [2]
        checkpoints = {s.name: s.position for s in runner.status()}
        archive = tmp_path / "archive"
        done = retention.apply(store, ORDERS, [], str(archive), checkpoints=checkpoints)
        assert (done.run.up_to, done.run.removed) == (3, 2)

        broken[0] = False
        archive.rename(tmp_path / "away")
        with pytest.raises(ArchiveBroken, match="is missing"):
            runner.retry_parked("totals", 2)
        assert [p.position for p in runner.parked("totals")] == [2]  # still parked

        (tmp_path / "away").rename(archive)
        runner.retry_parked("totals", 2)
        assert runner.parked("totals") == []
        with runner.database.reading() as connection:
            assert connection.execute(sa.select(totals.c.n)).scalar() == 43


def test_a_second_run_while_one_writes_the_archive_is_refused_and_the_archive_stays_whole(
    sqlite_url: str, tmp_path: Path
) -> None:
    from .retention_workers import apply_held_while_archiving

    archive = str(tmp_path / "archive")
    with EventStore.open(sqlite_url) as store:
        _paid(store, range(3))
    writing, go_on = PROCESSES.Event(), PROCESSES.Event()
    first = PROCESSES.Process(
        target=apply_held_while_archiving, args=(sqlite_url, archive, writing, go_on)
    )
    first.start()
    try:
        assert writing.wait(60), "the first run did not begin its segment"
        with EventStore.open(sqlite_url) as store:
            store.append("order-9", [NewEvent("Paid", {"cents": 1})])  # the head moves on
            with pytest.raises(Problems, match=f"another retention run holds .*{first.pid}"):
                retention.apply(store, ORDERS, [], archive)
    finally:
        go_on.set()
        first.join(60)
    assert first.exitcode == 0
    files = ArchiveFiles(archive)
    assert [(s.first, s.last) for s in files.segments()] == [(1, 15)]
    with EventStore.open(sqlite_url) as store:
        assert store.low_water_mark() == 15
        second = retention.apply(store, ORDERS, [], archive)  # the lock went with its run
        assert (second.plan.archived_to, second.run.up_to) == (15, 16)


def test_a_segment_is_not_committed_over_one_another_writer_committed_meanwhile(
    sqlite_url: str, tmp_path: Path
) -> None:
    with EventStore.open(sqlite_url) as store:
        _paid(store, range(2))
        events = list(store.read_all())
    files, other = ArchiveFiles(tmp_path / "a"), ArchiveFiles(tmp_path / "a")

    def racing() -> Any:
        yield events[0]
        other.write_segment(1, 4, events[:4])  # another writer commits while this one writes
        yield from events[1:]

    with pytest.raises(ArchiveBroken, match="another writer extended the archive to 4"):
        files.write_segment(1, 10, racing())
    assert [(s.first, s.last) for s in files.segments()] == [(1, 4)]
    assert [p for p in os.listdir(files.path) if p.startswith(".from")] == []


def test_a_store_without_retention_is_refused_before_the_archive_is_touched(
    tmp_path: Path,
) -> None:
    archive = tmp_path / "archive"
    with EventStore.open("memory://") as store:
        store.append("order-1", [NewEvent("Paid", {"cents": 1}) for _ in range(3)])
        for operation in (retention.plan, retention.apply):
            with pytest.raises(InputError, match="needs a SQLite or PostgreSQL store"):
                operation(store, ORDERS, [], str(archive))
    assert not archive.exists()
