"""The partitions benchmark (`python -m benchmarks.partitions`) runs at a tiny size, as a user
runs it, and writes the record its figure is drawn from (so that it cannot rot). Its
figures are measured by running it at 1M events, never here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from benchmarks.record import FORMAT

from .conftest import PG_URL, _need_postgres

# slow: A benchmark run whole at a tiny size (tens of seconds).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
FIGURES = [
    "remove_seconds",
    "run_seconds",
    "bytes_before",
    "bytes_after",
    "bytes_after_vacuum",
    "event_bytes_after",
    "event_bytes_after_vacuum",
    "dead_rows_after",
    "vacuum_seconds",
]


@pytest.fixture
def prefix() -> Iterator[str]:
    """A prefix for the benchmark's schemas; any left behind are dropped afterwards."""
    _need_postgres()
    name = f"t_bench_part_{uuid.uuid4().hex[:8]}"
    yield name
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        left = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (f"{name}%",)
        ).fetchall()
        for (schema,) in left:
            conn.execute(f"DROP SCHEMA {schema} CASCADE".encode())


def test_the_partitions_benchmark_runs_at_a_tiny_size_and_records_each_store(
    prefix: str, tmp_path: Path
) -> None:
    path = tmp_path / "partitions.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.partitions",
            "--events=3000",
            "--partition-events=1000",
            "--rounds=2",
            f"--prefix={prefix}",
            f"--json={path}",
        ],
        cwd=ROOT,
        env={**os.environ, "EVENTCRAFT_BENCH_PG": PG_URL},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "partitioned / unpartitioned (median of rounds): remove_seconds " in done.stdout
    assert done.stdout.count("load average at the") == 2
    record = json.loads(path.read_text())
    assert (record["format"], record["benchmark"]) == (FORMAT, "partitions")
    assert len(record["machine"]["load_average"]["start"]) == 3
    results = record["results"]
    assert (results["events"], results["partition_events"]) == (3000, 1000)
    assert len(results["rounds"]) == 2
    for round_ in results["rounds"]:
        assert set(round_) == {"partitioned", "unpartitioned"}
        for contender, found in round_.items():
            # 3000 old events in 3 streams, each one's newest kept; 300 live ones.
            assert (found["removed"], found["up_to"]) == (2997, 3300), contender
            assert found["remove_seconds"] > 0 and found["vacuum_seconds"] > 0
            assert found["before"]["events"]["live_rows"] == 3300
            assert found["after"]["events"]["live_rows"] == 303
            has_keys = contender == "partitioned"
            assert ("keys" in found["before"]) is has_keys
        partitioned, unpartitioned = round_["partitioned"], round_["unpartitioned"]
        # Row deletion leaves the removed rows dead in the events; replacing partitions
        # leaves none there (the key table's are the partitioned store's only ones).
        assert unpartitioned["after"]["events"]["dead_rows"] == 2997
        assert partitioned["after"]["events"]["dead_rows"] == 0
        assert partitioned["after"]["keys"]["dead_rows"] == 2997
    summary = results["summary"]
    assert list(summary["partitioned_over_unpartitioned"]) == FIGURES
    assert set(summary["medians"]) == {"partitioned", "unpartitioned"}
    with psycopg.connect(PG_URL) as conn:  # each store's schema dropped after its round
        left = conn.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname LIKE %s", (f"{prefix}%",)
        ).fetchone()
    assert left == (0,)
