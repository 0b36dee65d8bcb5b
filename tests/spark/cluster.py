"""A Spark standalone cluster on 127.0.0.1 (a master, workers) from the installed pyspark."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).parent
_START = 180.0
"""Seconds a master and its workers get to start on a loaded 2-core machine."""


def _daemon(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its own group: stopped with the JVM's children
        )


def _wait_for(log: Path, text: str, process: subprocess.Popen[bytes], deadline: float) -> str:
    """The log's text once it holds `text`."""
    while time.monotonic() < deadline:
        written = log.read_text(errors="replace")
        if text in written:
            return written
        if process.poll() is not None:
            break
        time.sleep(0.2)
    raise AssertionError(f"{log.name}: no {text!r} in time:\n{log.read_text(errors='replace')}")


@contextlib.contextmanager
def standalone(directory: Path, *, workers: int, pythonpath: str) -> Iterator[str]:
    """A master and `workers` one-core workers; yields the master's URL.

    The workers' executors see `pythonpath`: what they can import besides
    the installed packages of the interpreter running this.
    """
    env = {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_NO_DAEMONIZE": "1",
        "PYTHONPATH": pythonpath,
        "SPARK_WORKER_DIR": str(directory / "work"),
    }
    deadline = time.monotonic() + _START
    started: list[subprocess.Popen[bytes]] = []
    try:
        # Port 0 everywhere: each daemon takes the port the kernel gives it, so that no
        # other test (another pytest-xdist worker's) can take it first; the master's log
        # says which it took.
        log = directory / "master.log"
        host = ["--host", "127.0.0.1", "--webui-port", "0", "--port", "0"]
        started.append(_daemon(["org.apache.spark.deploy.master.Master", *host], log, env))
        written = _wait_for(log, "I have been elected leader", started[0], deadline)
        found = re.search(r"Starting Spark master at (spark://127\.0\.0\.1:\d+)", written)
        assert found, f"{log.name} names no master URL:\n{written}"
        master = found.group(1)
        for n in range(workers):
            log = directory / f"worker-{n}.log"
            args = ["org.apache.spark.deploy.worker.Worker", master, "--cores", "1"]
            args += ["--memory", "1g", "--host", "127.0.0.1", "--webui-port", "0"]
            started.append(_daemon(args, log, env))
            _wait_for(log, "Successfully registered with master", started[-1], deadline)
        yield master
    finally:
        for process in reversed(started):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(30)
