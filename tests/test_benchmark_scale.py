"""The scale benchmark's code path runs, at a tiny size, on each backend (so it cannot rot).

Its figures are measured by running `python -m benchmarks.scale`, never here.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from benchmarks.scale import Counts, run

from .conftest import PG_URL, _need_postgres

METRICS = [
    "single append p50",
    "single append p99",
    "batch of 100",
    "stream load",
    "global page",
    "category page",
    "category page / global",
    "bytes per event",
    "load, 100-event streams",  # at each size the logs grew to
]


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """A backend and a prefix for the benchmark's schemas (or files), dropped afterwards."""
    prefix = f"t_scale_{uuid.uuid4().hex[:8]}"
    if request.param == "postgresql":
        _need_postgres()
    yield request.param, prefix
    if request.param == "postgresql":
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            for side in ("ours", "plain"):
                conn.execute(f"DROP SCHEMA IF EXISTS {prefix}_{side} CASCADE")


def test_the_scale_benchmark_measures_every_metric_at_each_size(
    backend: tuple[str, str], tmp_path: Path
) -> None:
    name, prefix = backend
    counts = Counts(rounds=2, singles=2, batches=1, loads=1, pages=1)
    results = run(
        [name], [200, 1000], 10_000, counts, prefix=prefix, folder=tmp_path, server=PG_URL
    )
    assert list(results[name]) == [200, 1000]
    for at_size in results[name].values():
        assert [row.metric for row in at_size.rows] == METRICS
        assert all(row.ratio > 0 for row in at_size.rows)
