"""The JSON record of a benchmark run (`--json PATH`), which `benchmarks/charts.py` draws.

Every record has the same envelope, whatever the benchmark (`benchmarks/README.md`,
"JSON records", says what each field holds):

    {
      "format": "eventcraft-benchmark/1",
      "benchmark": "scale" | "group_commit" | "spark",
      "command": "python -m benchmarks.scale --sizes ...",
      "arguments": {...},            # every option, as parsed (defaults included)
      "commit": "<git rev-parse HEAD>",
      "uncommitted": ["path", ...],  # code files that differed from the commit
      "started": "2026-11-30T10:00:00+00:00", "finished": "...",
      "machine": {"cpus": 2, "platform": "...", "memory_bytes": ...,
                  "load_average": {"start": [1m, 5m, 15m], "end": [1m, 5m, 15m]}},
      "versions": {"python": "...", "eventcraft": "...", "postgresql": "...", ...},
      "results": {...}               # the benchmark's own figures
    }

The load average is taken when the run starts and when it ends: the machines these
figures come from are shared, and a figure made while others worked says so here.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import subprocess
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

FORMAT = "eventcraft-benchmark/1"
"""The envelope's version: a reader refuses a record of another."""

ROOT = Path(__file__).resolve().parent.parent
DISTRIBUTIONS = ("eventcraft", "psycopg", "orjson", "eventsourcing", "pyspark", "pyarrow")
"""The packages whose versions a record names, those installed."""


class Record:
    """What a run measured, with where and when: started with the run, written at its end."""

    def __init__(self, benchmark: str, args: argparse.Namespace, *, postgres: str = "") -> None:
        """`postgres`: the server's URL, when the run uses PostgreSQL (its version is named)."""
        self.benchmark = benchmark
        self.arguments = {
            name: str(value) if isinstance(value, Path) else value
            for name, value in sorted(vars(args).items())
        }
        self.command = " ".join(["python -m", f"benchmarks.{benchmark}", *sys.argv[1:]])
        self.started = _now()
        self.load_start = list(os.getloadavg())
        # The code that runs is what was there at the start.
        self.commit = _git("rev-parse", "HEAD")
        self.uncommitted = _uncommitted()
        self.postgres = postgres

    def write(self, path: Path, results: dict[str, Any]) -> None:
        """The record, with the load average now, as indented JSON at `path`."""
        document = {
            "format": FORMAT,
            "benchmark": self.benchmark,
            "command": self.command,
            "arguments": self.arguments,
            "commit": self.commit,
            "uncommitted": self.uncommitted,
            "started": self.started,
            "finished": _now(),
            "machine": {
                "cpus": os.cpu_count(),
                "platform": platform.platform(),
                "memory_bytes": _memory_bytes(),
                "load_average": {"start": self.load_start, "end": list(os.getloadavg())},
            },
            "versions": versions(self.postgres),
            "results": results,
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(document, indent=2) + "\n")


def versions(postgres: str = "", distributions: Iterable[str] = DISTRIBUTIONS) -> dict[str, str]:
    """Python's, SQLite's, the installed `distributions`' and, given its URL, PostgreSQL's."""
    found = {"python": platform.python_version(), "sqlite": sqlite3.sqlite_version}
    for name in distributions:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    if postgres:
        import psycopg

        with psycopg.connect(postgres, connect_timeout=5) as conn:
            row = conn.execute("SHOW server_version").fetchone()
        found["postgresql"] = str(row[0]) if row else ""
    return found


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
    return done.stdout.strip()


def _uncommitted() -> list[str]:
    """Tracked files outside the docs and tests that differ from the commit: the code run
    was not exactly the commit's when this is not empty."""
    changed = _git("diff", "HEAD", "--name-only", "--", ".", ":!docs", ":!tests", ":!*.md")
    return sorted(line for line in changed.splitlines() if line)


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return None
