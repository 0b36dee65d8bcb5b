"""The benchmarks' JSON records (`--json PATH`) and the charts drawn from them.

Each benchmark runs here at a tiny size, as a user runs it (`python -m benchmarks.X`),
so that the record's shape, which `benchmarks/charts.py` and the documentation's data
rely on, cannot drift from what the charts read. No figure is judged: speed is measured
by running the benchmarks, never in tests.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from benchmarks.record import FORMAT

from .conftest import PG_URL, _need_postgres

# slow: benchmarks run whole at tiny sizes, and their charts drawn.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
PNG = b"\x89PNG\r\n\x1a\n"
SCALE_METRICS = [
    "single append p50",
    "single append p99",
    "batch of 100",
    "stream load",
    "global page",
    "category page",
    "category page / global",
    "bytes per event",
    "load, 100-event streams",
]


def run_module(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m <module> <args>` from the repository, on the tests' PostgreSQL server."""
    env = {**os.environ, "EVENTCRAFT_BENCH_PG": PG_URL}
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


@pytest.fixture(scope="module")
def prefix() -> Iterator[str]:
    """A prefix for the benchmarks' schemas, all dropped afterwards."""
    _need_postgres()
    name = f"t_bench_{uuid.uuid4().hex[:8]}"
    yield name
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        schemas = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (f"{name}%",)
        ).fetchall()
        for (schema,) in schemas:
            conn.execute(f"DROP SCHEMA {schema} CASCADE".encode())


@pytest.fixture(scope="module")
def records(prefix: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The records of the store at scale and of group commit, each run at a tiny size."""
    folder = tmp_path_factory.mktemp("records")
    runs = {
        "scale": [
            "--sizes=200,1000",
            "--rounds=2",
            "--singles=2",
            "--batches=1",
            "--loads=1",
            "--pages=1",
            f"--prefix={prefix}_scale",
            f"--folder={folder}",
        ],
        "group_commit": [
            "--callers=1,2",
            "--appends=8",
            "--rounds=1",
            "--batches=4",
            f"--prefix={prefix}_gc",
        ],
    }
    for name, args in runs.items():
        done = run_module(f"benchmarks.{name}", *args, f"--json={folder / name}.json")
        assert done.returncode == 0, done.stderr
    return {name: folder / f"{name}.json" for name in runs}


def check_envelope(record: dict[str, Any], benchmark: str, path: Path) -> None:
    """What every record holds beside its results."""
    assert record["format"] == FORMAT
    assert record["benchmark"] == benchmark
    assert record["command"].startswith(f"python -m benchmarks.{benchmark} ")
    assert record["arguments"]["json"] == str(path)
    assert re.fullmatch(r"[0-9a-f]{40}", record["commit"])
    assert isinstance(record["uncommitted"], list)
    assert record["started"] <= record["finished"]
    machine = record["machine"]
    assert machine["cpus"] == os.cpu_count()
    for moment in ("start", "end"):
        assert len(machine["load_average"][moment]) == 3
    assert {"python", "sqlite", "eventcraft", "psycopg", "postgresql"} <= set(record["versions"])


@pytest.mark.slow
def test_the_scale_benchmark_writes_every_figure_of_its_tables(records: dict[str, Path]) -> None:
    record = json.loads(records["scale"].read_text())
    check_envelope(record, "scale", records["scale"])
    assert list(record["results"]) == ["postgresql", "sqlite"]
    for backend in record["results"].values():
        assert [at["size"] for at in backend["sizes"]] == [200, 1000]
        assert list(backend["growth"]) == SCALE_METRICS
        for at in backend["sizes"]:
            assert at["events"] >= at["size"] and at["grown_seconds"] >= 0
            assert [m["metric"] for m in at["metrics"]] == SCALE_METRICS
            for metric in at["metrics"]:
                assert metric["unit"] in ("ms", "events/s", "bytes/event")
                assert metric["eventcraft"] > 0 and metric["reference"] > 0
                assert metric["ratio"] > 0
            sides = {m["metric"]: m["reference_side"] for m in at["metrics"]}
            assert sides["category page / global"] == "eventcraft"
            assert sides["global page"] == "plain table"
    assert record["results"]["sqlite"]["sizes"][0]["metrics"][2]["goal"] == 2.0


def test_the_group_commit_benchmark_writes_every_figure_of_its_tables(
    records: dict[str, Path],
) -> None:
    record = json.loads(records["group_commit"].read_text())
    check_envelope(record, "group_commit", records["group_commit"])
    results = record["results"]
    assert [lone["backend"] for lone in results["lone"]] == ["postgres", "sqlite"]
    assert all(lone["grouped_us"] > 0 and lone["ungrouped_us"] > 0 for lone in results["lone"])
    runs = [(run["backend"], run["callers"]) for run in results["singles"]]
    assert runs == [("postgres", 1), ("postgres", 2), ("sqlite", 1), ("sqlite", 2)]
    names = {
        "postgres": ["grouped", "ungrouped", "async grouped", "raw"],
        "sqlite": ["grouped", "ungrouped", "raw"],
    }
    for run in results["singles"]:
        assert [c["name"] for c in run["contenders"]] == names[run["backend"]]
        for contender in run["contenders"]:
            assert set(contender) == {"name", "events_per_s", "p50_ms", "p99_ms", "per_raw"}
        assert run["grouped_over_ungrouped_rate"] > 0
    batches = results["batches"]
    assert (batches["threads"], batches["size"], batches["batches"]) == (4, 50, 4)
    assert [c["name"] for c in batches["contenders"]] == [
        "grouped",
        "ungrouped",
        "eventsourcing",
        "raw, our rows",
    ]


@pytest.mark.slow
def test_the_charts_are_pngs_and_the_same_records_give_the_same_bytes(
    records: dict[str, Path], tmp_path: Path
) -> None:
    paths = [str(records["scale"]), str(records["group_commit"])]
    for out in ("first", "second"):
        done = run_module("benchmarks.charts", *paths, f"--out={tmp_path / out}")
        assert done.returncode == 0, done.stderr
    names = ["group-commit.png", "scale-postgresql.png", "scale-sqlite.png"]
    assert sorted(p.name for p in (tmp_path / "first").iterdir()) == names
    for name in names:
        drawn = (tmp_path / "first" / name).read_bytes()
        assert drawn.startswith(PNG)
        assert drawn == (tmp_path / "second" / name).read_bytes()


def test_a_record_of_a_benchmark_without_charts_is_skipped_and_said_so(
    records: dict[str, Path], tmp_path: Path
) -> None:
    other = tmp_path / "other.json"
    record = json.loads(records["group_commit"].read_text())
    other.write_text(json.dumps({**record, "benchmark": "schema"}))
    done = run_module("benchmarks.charts", str(other), f"--out={tmp_path / 'out'}")
    assert done.returncode == 0, done.stderr
    assert done.stderr == f"{other}: no charts for 'schema', skipped\n"
    assert list((tmp_path / "out").iterdir()) == []


@pytest.mark.parametrize(
    "spoil",
    [
        pytest.param(lambda text: text[: len(text) // 2], id="cut short"),
        pytest.param(lambda text: text.replace('"metrics"', '"figures"'), id="a key missing"),
        pytest.param(lambda text: text.replace(FORMAT, "something/2"), id="another format"),
    ],
)
def test_a_malformed_record_fails_with_one_message_naming_its_file(
    records: dict[str, Path], tmp_path: Path, spoil: Any
) -> None:
    good = tmp_path / "good.json"
    good.write_text(records["group_commit"].read_text())
    bad = tmp_path / "bad.json"
    bad.write_text(spoil(records["scale"].read_text()))
    done = run_module("benchmarks.charts", str(good), str(bad), f"--out={tmp_path / 'out'}")
    assert done.returncode == 1
    assert done.stderr.startswith(f"benchmarks.charts: {bad}: ")
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


@pytest.mark.spark
@pytest.mark.slow
def test_the_spark_benchmark_writes_its_figures_and_its_chart(prefix: str, tmp_path: Path) -> None:
    path = tmp_path / "spark.json"
    args = ["--sizes=400", "--cores=1", "--rounds=2", f"--prefix={prefix}_spark"]
    args += [f"--archives={tmp_path / 'archives'}", f"--json={path}"]
    done = run_module("benchmarks.spark", *args)
    assert done.returncode == 0, done.stderr
    record = json.loads(path.read_text())
    check_envelope(record, "spark", path)
    (at,) = record["results"]["sizes"]
    assert at["size"] == 400 and at["generated_seconds"] > 0
    assert [r["fold"] for r in at["in_process"]] == ["apply", "reducers"]
    (one,) = at["cores"]
    assert one["cores"] == 1 and one["export"]["events"] == 400
    replays = [(r["source"], r["fold"]) for r in one["replays"]]
    assert replays == [
        ("from the Parquet archive", "apply"),
        ("from the Parquet archive", "reducers"),
        ("from the archive, data unparsed", "reducers"),
        ("from PostgreSQL", "apply"),
        ("from PostgreSQL", "reducers"),
    ]
    assert all(r["events"] == 400 and r["events_per_s"] > 0 for r in one["replays"])
    assert len(at["summary"]) == 5
    done = run_module("benchmarks.charts", str(path), f"--out={tmp_path / 'charts'}")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "charts" / "spark.png").read_bytes().startswith(PNG)


def test_the_schema_benchmark_times_the_check_and_the_verify_beside_plain_reads(
    prefix: str, tmp_path: Path
) -> None:
    path = tmp_path / "schema.json"
    done = run_module(
        "benchmarks.schema",
        "--sizes=300",
        "--rounds=1",
        "--types=20",
        f"--prefix={prefix}_schema",
        f"--folder={tmp_path}",
        f"--json={path}",
    )
    assert done.returncode == 0, done.stderr
    record = json.loads(path.read_text())
    check_envelope(record, "schema", path)
    assert record["results"]["check"]["types"] == 20
    assert record["results"]["check"]["check_seconds"] > 0
    assert [(v["backend"], v["events"]) for v in record["results"]["verify"]] == [
        ("postgres", 300),
        ("sqlite", 300),
    ]
    for verified in record["results"]["verify"]:
        rates = verified["events_per_second"]
        assert set(rates) == {"read_all", "read_all_encoded", "verify"}
        assert verified["verify_over_read_all"] > 0
