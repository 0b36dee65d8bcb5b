"""Spark below the low-water mark: a replay or a read of the log whose archive is missing or
ends below the mark refuses, naming the folder and what is missing, as the in-process
rebuild does (`log_start.archive_below`); it never builds a read model without the archived
events."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from eventcraft.eventstore import EventStore
from eventcraft.eventstore.retention import RetentionPolicy
from eventcraft.projections import ProjectionRunner
from eventcraft.projections.archive_files import ArchiveBroken, ArchiveFiles

from eventcraft.operations import retention
from examples.read_models import account_balances

from .histories import append, balance_rows

HISTORY = [[(n % 7, kind, 100 + n)] for n, kind in enumerate(["open", "deposit", "deposit"] * 10)]
ACCOUNTS = [RetentionPolicy("account", max_count=1)]


def test_a_replay_whose_archive_folder_is_gone_refuses_and_keeps_the_read_model(
    spark: Any, sqlite_url: str, tmp_path: Path
) -> None:
    from eventcraft.projections.spark import replay

    archive = tmp_path / "archive"
    with EventStore.open(sqlite_url) as store, ProjectionRunner(store, [account_balances]) as r:
        append(store, HISTORY)
        replay(account_balances, sqlite_url, spark=spark)
        before = balance_rows(r)
        retention.apply(store, ACCOUNTS, [], str(archive))
        archive.rename(tmp_path / "away")
        with pytest.raises(ArchiveBroken, match=f"archive folder {archive} is missing"):
            replay(account_balances, sqlite_url, spark=spark)
        assert balance_rows(r) == before  # nothing swapped in


def test_a_replay_whose_archive_ends_below_the_mark_refuses(
    spark: Any, sqlite_url: str, tmp_path: Path
) -> None:
    from eventcraft.projections.spark import replay

    archive = tmp_path / "archive"
    with EventStore.open(sqlite_url) as store:
        append(store, HISTORY)
        first = retention.apply(store, ACCOUNTS, [], str(archive)).run.up_to
        append(store, HISTORY)
        second = retention.apply(store, ACCOUNTS, [], str(archive)).run.up_to
        shutil.rmtree(ArchiveFiles(archive).segments()[-1].path)  # the second run's segment
        with pytest.raises(
            ArchiveBroken,
            match=f"ends at position {first}, below the low-water mark {second}",
        ):
            replay(account_balances, sqlite_url, spark=spark)


def test_reading_the_events_of_a_retained_store_reads_its_archive_below_the_mark(
    spark: Any, sqlite_url: str, tmp_path: Path
) -> None:
    from eventcraft.projections.spark import read_events

    archive = tmp_path / "archive"
    with EventStore.open(sqlite_url) as store:
        append(store, HISTORY)
        whole = [e.position for e in store.read_all()]
        retention.apply(store, ACCOUNTS, [], str(archive))
        assert len(list(store.read_all())) < len(whole)
    read = read_events(spark, sqlite_url).orderBy("position").select("position").collect()
    assert [row.position for row in read] == whole
    archive.rename(tmp_path / "away")
    with pytest.raises(ArchiveBroken, match=f"archive folder {archive} is missing"):
        read_events(spark, sqlite_url)


def test_reading_an_archive_whose_folder_is_missing_refuses(spark: Any, tmp_path: Path) -> None:
    from eventcraft.projections.spark import Archive, ArchiveError, read_events

    with pytest.raises(ArchiveError, match=f"archive folder {tmp_path / 'none'} is missing"):
        read_events(spark, Archive(str(tmp_path / "none")))
