"""`python -m benchmarks.floors` runs every measure of issue 56 beside its floor and writes
the record the documentation's chart is drawn from.

Run here at a tiny size, as a user runs it, so that the command and the record's shape
cannot rot. No figure is judged: those depend on the machine, and speed is measured by
running the benchmark, never in tests.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from benchmarks.floors import MEASURES

from .conftest import PG_URL, _need_postgres
from .test_benchmarks_json import PNG, check_envelope, run_module

TINY = [
    "--single=5",
    "--writers=2",
    "--concurrent=3",
    "--decisions=16",
    "--lone-decisions=3",
    "--contended=16",
    "--appends=16",
    "--batches=4",
    "--sqlite-events=300",
    "--pages=2",
    "--wal-appends=2",
]


@pytest.fixture
def prefix() -> Iterator[str]:
    """A prefix for the benchmark's schemas and tables; any it left are dropped after."""
    _need_postgres()
    name = f"t_floors_{uuid.uuid4().hex[:8]}"
    yield name
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        left = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (f"{name}%",)
        ).fetchall()
        for (schema,) in left:
            conn.execute(f"DROP SCHEMA {schema} CASCADE".encode())


@pytest.mark.slow
def test_the_floors_benchmark_writes_every_measure_with_its_floor_and_ratio(
    prefix: str, tmp_path: Path
) -> None:
    path = tmp_path / "floors.json"
    args = ["--quick", "--rounds=1", *TINY, f"--prefix={prefix}", f"--folder={tmp_path}"]
    done = run_module("benchmarks.floors", *args, f"--json={path}")
    assert done.returncode == 0, done.stderr

    record = json.loads(path.read_text())
    check_envelope(record, "floors", path)
    assert record["arguments"]["single"] == 5 and record["arguments"]["quick"] is True
    measures = record["results"]["measures"]
    assert [m["measure"] for m in measures] == [m.name for m in MEASURES]
    for measure in measures:
        assert measure["floor_is"] and measure["unit"]
        assert measure["eventcraft"] > 0 and measure["floor"] > 0
        (only,) = measure["rounds"]
        assert only["eventcraft"] > 0 and only["floor"] > 0
        assert measure["ratio"] == only["ratio"] == only["eventcraft"] / only["floor"]
        assert measure["spread"] == {"min": measure["ratio"], "max": measure["ratio"]}
        assert measure["goal"] > 0 and measure["better"] in ("higher", "lower")
        assert isinstance(measure["met"], bool)
    assert len(record["results"]["round_load_average"]) == 1
    # The table printed holds a row for each measure, with its goal.
    for measure in MEASURES:
        assert f"| {measure.name} |" in done.stdout
        assert measure.goal_text in done.stdout
    assert "load average (1, 5, 15 min)" in done.stdout

    # Nothing left behind on the shared server (the schemas and the DCB tables) or in the
    # folder given.
    with psycopg.connect(PG_URL) as conn:
        left = conn.execute(
            "SELECT count(*) FROM pg_class WHERE relname LIKE %s", (f"{prefix}%",)
        ).fetchone()
    assert left == (0,)
    assert sorted(p.name for p in tmp_path.glob("*.db*")) == []  # nor SQLite files

    charts = tmp_path / "charts"
    drawn = run_module("benchmarks.charts", str(path), f"--out={charts}")
    assert drawn.returncode == 0, drawn.stderr
    assert (charts / "floors.png").read_bytes().startswith(PNG)


def test_sizes_below_one_are_refused_naming_them(tmp_path: Path) -> None:
    done = run_module("benchmarks.floors", "--quick", "--pages=0", f"--json={tmp_path / 'x'}")
    assert done.returncode == 2
    assert "pages" in done.stderr
    assert not (tmp_path / "x").exists()
