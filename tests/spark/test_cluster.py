"""Replays on a standalone cluster: a master and two workers on 127.0.0.1, tasks in their executors.

What the README's cluster section asks of the executors is shown here:
eventcraft installed in their Python (the driver's interpreter here), the
fold's module importable there (the repository on the workers' path, or
shipped with `addPyFile`, else the replay fails naming the module), and
the archive and SQLite store on a filesystem every process sees.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from eventcraft.eventstore import EventStore
from eventcraft.projections import ProjectionRunner

from examples.read_models import account_balances
from tests.conftest import _need_postgres, missing

from .cluster import SPARK_HOME, standalone
from .histories import append, balance_rows

ROOT = Path(__file__).resolve().parents[2]
HISTORY = [[(n % 9, kind, 100 + n)] for n, kind in enumerate(["open", "deposit", "withdraw"] * 20)]
FOLDS = """
from eventcraft.projections import Fold
from examples.read_models import account_balances, balances


def account_of(event):  # named: pickled by reference, so executors must import this module
    return event.stream_id.removeprefix("account-")


balances_elsewhere = Fold(
    account_balances.name,
    table=balances,
    categories="account",
    key=account_of,
    initial=account_balances.initial,
    apply=account_balances.evolve,
)
"""


@pytest.fixture
def spark_class() -> None:
    if not (SPARK_HOME / "bin" / "spark-class").exists():
        missing(f"no spark-class in {SPARK_HOME}: the installed pyspark cannot start a cluster")


def test_replays_on_a_standalone_cluster_equal_the_in_process_rebuild(
    spark_class: None, sqlite_url: str, pg_url: str, tmp_path: Path
) -> None:
    _need_postgres()
    urls = [sqlite_url, pg_url]
    expected = []
    for url in urls:
        with EventStore.open(url) as store:
            append(store, HISTORY)
            with ProjectionRunner(store, [account_balances]) as runner:
                runner.rebuild(account_balances.name)
                expected.append(balance_rows(runner))
    folds = tmp_path / "cluster_folds.py"
    folds.write_text(FOLDS)
    with standalone(tmp_path, workers=2, pythonpath=str(ROOT)) as master:
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
        command = [sys.executable, "-m", "tests.spark.cluster_driver", master]
        command += [str(tmp_path / "archive"), str(folds), *urls]
        done = subprocess.run(
            command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=540
        )
    assert done.returncode == 0, done.stderr[-5000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["executors"] == 2
    assert out["driver_pid"] not in out["executor_pids"]
    assert out["store-0"]["read_path"] == "python" and out["store-1"]["read_path"] == "jdbc"
    assert out["export"]["events"] == len(HISTORY) and out["archive"]["read_path"] == "archive"
    assert out["unshipped"]["type"] == "ModuleNotFoundError"
    assert "No module named 'cluster_folds'" in out["unshipped"]["message"]
    assert out["shipped"]["events"] > 0
    # The read models the cluster's last replays swapped in serve what the rebuild wrote.
    for url, rows in zip(urls, expected, strict=True):
        with EventStore.open(url) as store, ProjectionRunner(store, [account_balances]) as runner:
            assert balance_rows(runner) == rows
