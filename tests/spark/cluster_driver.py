"""The driver of the cluster test, in a process of its own (one SparkContext a process).

Usage: python -m tests.spark.cluster_driver MASTER ARCHIVE FOLDS_FILE STORE_URL...
Prints one JSON object: what each replay reported, or the error it raised.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any


def main(master: str, archive_path: str, folds_file: str, *urls: str) -> dict[str, Any]:
    from eventcraft.projections.spark import Archive, ReplayFailed, replay, spark_session

    from examples.read_models import account_balances

    spark = spark_session(
        master,
        app_name="eventcraft-cluster-test",
        settings={
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.enabled": "false",
            "spark.executor.memory": "512m",
            "spark.cores.max": "2",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
            "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        },
    )
    out: dict[str, Any] = {}
    try:
        context = spark.sparkContext
        # Each executor's Python worker says where it runs: not in the driver's process tree.
        pids = context.parallelize(range(4), 4).map(lambda _: os.getppid()).distinct().collect()
        out["executor_pids"] = sorted(pids)
        out["driver_pid"] = os.getpid()
        infos = context._jsc.sc().statusTracker().getExecutorInfos()
        out["executors"] = len(infos) - 1  # the driver is listed too
        for n, url in enumerate(urls):
            report = replay(account_balances, url, spark=spark)
            out[f"store-{n}"] = dataclasses.asdict(report)
        archive = Archive(archive_path)
        out["export"] = dataclasses.asdict(archive.export(spark, urls[0]))
        report = replay(account_balances, urls[0], spark=spark, source=archive)
        out["archive"] = dataclasses.asdict(report)
        # A fold whose module the driver imports but the executors cannot.
        sys.path.insert(0, str(Path(folds_file).parent))
        spec = importlib.util.find_spec(Path(folds_file).stem)
        assert spec is not None
        module = importlib.import_module(Path(folds_file).stem)
        try:
            replay(module.balances_elsewhere, urls[0], spark=spark)
            out["unshipped"] = "replayed"
        except ReplayFailed as error:
            out["unshipped"] = {"type": error.error_type, "message": str(error)}
        context.addPyFile(folds_file)  # shipped: now the executors import it
        out["shipped"] = dataclasses.asdict(replay(module.balances_elsewhere, urls[0], spark=spark))
    finally:
        spark.stop()
    return out


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:])))
