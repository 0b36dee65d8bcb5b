"""Spark's reads of a store retention archived give the events of the store's own whole
read (`archive=`): every field of every event once, the archive's below the low-water mark
and the table's above it; and an executor's range read, planned before a run moved the
mark past it, takes what the run removed from the archive."""

from __future__ import annotations

import json
from datetime import UTC
from pathlib import Path
from typing import Any

import pyarrow as pa
from eventcraft.eventstore import EventStore, NewEvent
from eventcraft.eventstore.retention import RetentionPolicy

from eventcraft.operations import retention

ORDERS = [RetentionPolicy("order", max_count=1)]


def _history(store: EventStore) -> None:
    for n in range(8):
        store.append(
            f"order-{n}",
            [
                NewEvent(
                    "Paid", {"n": n, "k": k}, metadata={"by": "u"}, tags=[f"c:{n}"] if k else []
                )
                for k in range(6)
            ],
        )


def test_read_events_from_0_gives_the_stores_whole_log_each_event_once(
    spark: Any, shared_store_url: str, tmp_path: Path
) -> None:
    from eventcraft.projections.spark import read_events

    url = shared_store_url
    with EventStore.open(url) as store:
        _history(store)
        retention.apply(store, ORDERS, [], str(tmp_path / "archive"))
        store.append("order-1", [NewEvent("Paid", {"after": "the run"})])
    with EventStore.open(url, archive=True) as store:
        whole = [
            (
                e.position,
                str(e.id),
                e.stream_id,
                e.version,
                e.type,
                e.data,
                e.metadata,
                e.recorded_at,
                list(e.tags),
            )
            for e in store.read_all()
        ]
    assert len(whole) == 49
    rows = read_events(spark, url).orderBy("position").collect()
    assert [
        (
            r.position,
            r.id,
            r.stream_id,
            r.version,
            r.type,
            json.loads(r.data),
            json.loads(r.metadata),
            r.recorded_at.replace(tzinfo=UTC),  # the session's time zone is UTC
            list(r.tags),
        )
        for r in rows
    ] == whole


def test_an_executors_range_planned_before_a_run_reads_what_it_removed_from_the_archive(
    spark: Any, shared_store_url: str, tmp_path: Path
) -> None:
    from eventcraft.projections.spark.source import _read_ranges, ranges

    url = shared_store_url
    with EventStore.open(url) as store:
        _history(store)
        head = store.high_water_mark()
        whole = [str(e.id) for e in store.read_all()]
    bounds = tuple(ranges(0, head, 3))  # as the driver planned them, with the mark at 0
    with EventStore.open(url) as store:
        retention.apply(store, ORDERS, [], str(tmp_path / "archive"))
        assert len(list(store.read_all())) == 8
    plans = [pa.RecordBatch.from_pydict({"id": list(range(len(bounds)))})]
    batches = list(_read_ranges(url, bounds, None, None, iter(plans)))
    assert [i for batch in batches for i in batch.column("id").to_pylist()] == whole


def test_a_replay_planned_before_a_run_removed_what_it_reads_folds_every_event(
    spark: Any, shared_store_url: str, tmp_path: Path, monkeypatch: Any
) -> None:
    """Python workers take what the run removed from the archive; the JDBC source cannot,
    so the replay sees the mark moved after its job, swaps nothing in, and runs again."""
    import importlib

    from eventcraft.projections import ProjectionRunner
    from eventcraft.projections.spark import replay

    from examples.read_models import account_balances

    from .histories import append, balance_rows

    url = shared_store_url
    replays = importlib.import_module("eventcraft.projections.spark.replay")
    history = [[(n % 7, kind, 100 + n)] for n, kind in enumerate(["open", "deposit"] * 15)]
    with EventStore.open(url) as store, ProjectionRunner(store, [account_balances]) as runner:
        append(store, history)
        runner.catch_up()
        before = balance_rows(runner)
        planned = replays.read_whole_log
        paths = []

        def then_a_run(*args: Any, **kwargs: Any) -> Any:
            # The job is planned with the mark at 0; the run removes what it will read.
            whole = planned(*args, **kwargs)
            paths.append(whole.path)
            if len(paths) == 1:
                policy = [RetentionPolicy("account", max_count=1)]
                retention.apply(store, policy, [], str(tmp_path / "archive"))
            return whole

        monkeypatch.setattr(replays, "read_whole_log", then_a_run)
        report = replay(account_balances, url, spark=spark)
        assert store.low_water_mark() == 30
        assert report.events == 30
        assert balance_rows(runner) == before
    if url.startswith("sqlite"):
        assert paths == ["python"]
    else:
        assert paths == ["jdbc", "archive+jdbc"]  # the first job's read was outrun
