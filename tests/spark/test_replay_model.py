"""The Spark replay's read model equals the incremental projector's, row for row."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from eventcraft.eventstore import EventStore
from eventcraft.projections import ProjectionRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from examples.read_models import account_balances
from tests.conftest import PG_URL, _need_postgres

from .histories import append, balance_rows, fresh_store_url, histories, python_keyed_balances


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    history=histories,
    batch_size=st.integers(1, 50),
    from_archive=st.booleans(),
    python_key=st.booleans(),
)
def test_spark_replay_equals_the_incremental_projector(
    spark: Any,
    kind: str,
    history: list[list[tuple[int, str, int]]],
    batch_size: int,
    from_archive: bool,
    python_key: bool,
) -> None:
    from eventcraft.projections.spark import Archive, replay

    if kind == "postgres":
        _need_postgres()
    with (
        tempfile.TemporaryDirectory() as directory,
        fresh_store_url(kind, PG_URL, Path(directory)) as url,
        EventStore.open(url) as store,
    ):
        append(store, history)
        with ProjectionRunner(store, [account_balances], batch_size=batch_size) as runner:
            runner.catch_up()
            incremental = balance_rows(runner)
        source = None
        if from_archive:
            source = Archive(str(Path(directory) / "archive"))
            source.export(spark, url)
        fold = python_keyed_balances if python_key else account_balances
        report = replay(fold, url, spark=spark, source=source, partitions=3)
        head = store.high_water_mark()
        with ProjectionRunner(store, [account_balances]) as runner:
            assert balance_rows(runner) == incremental
            (status,) = runner.status()
        accounts = list(store.read_all(categories="account"))
        assert report.events == len(accounts)
        assert report.rows == len(incremental)
        assert report.replayed_to == report.position == status.position == head
        assert status.generation == report.generation > 1


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    prefix=st.text(max_size=4),
    stream_ids=st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=20),
)
def test_a_stream_key_computed_by_spark_is_the_one_python_computes(
    spark: Any, prefix: str, stream_ids: list[str]
) -> None:
    from eventcraft.projections import StreamKey
    from eventcraft.projections.spark.replay import _stream_key

    key = StreamKey(prefix)
    frame = spark.createDataFrame([(s,) for s in stream_ids], "stream_id string")
    computed = [row.key for row in frame.select(_stream_key(key).alias("key")).collect()]
    assert computed == [s.removeprefix(prefix) for s in stream_ids]
