"""A SparkSession for replays: any master URL, with settings that suit small local runs.

Nothing here assumes local mode. `master` is whatever `spark-submit
--master` takes (`local[2]`, `spark://host:7077`, `yarn`); on a cluster the
executors need eventcraft and the module that defines the projection
importable (installed, or shipped with `spark.submit.pyFiles`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession

from .jdbc import jars

LOCAL_SETTINGS: Mapping[str, str] = {
    # Measured on a 2-core machine (../shared/SPARK_NOTES.md): together these
    # take a local session from ~90 s to ~25 s for the first small job.
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.memory": "1g",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.codegen.wholeStage": "false",
    "spark.shuffle.compress": "false",
    "spark.rdd.compress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
}
"""For tests and small local jobs; a cluster job keeps Spark's defaults.

Example::

    # needs: spark
    from eventcraft.projections.spark import LOCAL_SETTINGS, spark_session

    spark = spark_session("local[2]", settings=LOCAL_SETTINGS)  # starts in seconds
    assert LOCAL_SETTINGS["spark.ui.enabled"] == "false"  # no web UI to start
    assert spark.conf.get("spark.sql.shuffle.partitions") == "2"  # a small job's few tasks
"""


def spark_session(
    master: str = "local[*]",
    *,
    app_name: str = "eventcraft",
    settings: Mapping[str, str] | None = None,
) -> SparkSession:
    """The process's SparkSession for `master`, created on first use.

    `settings` are Spark configuration keys; settings that size the JVM
    (driver memory, Java options) count only before the first session.
    In local mode the Python workers run the interpreter running this, so
    the fold's code is found wherever the driver finds it. The PostgreSQL
    JDBC driver is added to `spark.jars` when this machine has it, so that
    replays and exports read a PostgreSQL store in the JVM.

    Example::

        # needs: spark
        from eventcraft.projections.spark import LOCAL_SETTINGS, spark_session

        spark = spark_session("local[2]", settings=LOCAL_SETTINGS)  # or "spark://host:7077"
        assert spark_session("local[2]") is spark  # the process's one session, made on first use
        assert spark.range(3).count() == 3
    """
    if master.startswith("local"):
        # Local workers run this interpreter, so they import what the driver
        # imports; a cluster's executors use their own Python.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app_name)
    settings = dict(settings or {})
    # The JDBC drivers this machine has (Debian's), shipped to the executors too.
    found = ",".join(jars())
    if found:
        given = settings.get("spark.jars")
        settings["spark.jars"] = f"{given},{found}" if given else found
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
