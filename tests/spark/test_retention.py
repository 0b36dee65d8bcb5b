"""The Spark replay after retention: the archive up to the store's low-water mark (written
with pyarrow, read by Spark's `Archive` as its own), then the store; the read model equals
the one replayed before the run, and the in-process rebuild's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eventcraft.eventstore import EventStore
from eventcraft.eventstore.retention import RetentionPolicy
from eventcraft.projections import ProjectionRunner

from eventcraft.operations import retention
from examples.read_models import account_balances

from .histories import append, balance_rows

HISTORY = [[(n % 7, kind, 100 + n)] for n, kind in enumerate(["open", "deposit", "deposit"] * 10)]


def test_a_replay_after_retention_reads_the_archive_then_the_store(
    spark: Any, shared_store_url: str, tmp_path: Path
) -> None:
    from eventcraft.projections.spark import Archive, replay

    url, archive = shared_store_url, str(tmp_path / "archive")
    with EventStore.open(url) as store, ProjectionRunner(store, [account_balances]) as runner:
        append(store, HISTORY)
        replay(account_balances, url, spark=spark)
        before = balance_rows(runner)
        head = store.high_water_mark()
        report = retention.apply(store, [RetentionPolicy("account", max_count=1)], [], archive)
        assert report.run.removed == head - 7  # each of the 7 accounts keeps its newest
        assert Archive(archive).last_position(spark) == head  # Spark reads pyarrow's segment
        append(store, HISTORY[:3])  # and the log goes on after the mark
        replayed = replay(account_balances, url, spark=spark)
        assert replayed.read_path.startswith("archive+")
        after = balance_rows(runner)
        runner.rebuild(account_balances.name)
        assert balance_rows(runner) == after
        assert after != before  # the three new events count
        assert replayed.events == head + 3


def test_an_export_to_another_archive_after_retention_is_refused(
    spark: Any, sqlite_url: str, tmp_path: Path
) -> None:
    import pytest
    from eventcraft.projections.spark import Archive, ArchiveError

    with EventStore.open(sqlite_url) as store:
        append(store, HISTORY)
        retention.apply(store, [RetentionPolicy("account", max_count=1)], [], str(tmp_path / "a"))
    with pytest.raises(ArchiveError, match="begins to be whole after"):
        Archive(str(tmp_path / "b")).export(spark, sqlite_url)
    assert Archive(str(tmp_path / "a")).export(spark, sqlite_url).events == 0  # already whole
