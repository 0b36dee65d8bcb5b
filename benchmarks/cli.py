"""`eventcraft log` on a large log: `python -m benchmarks.cli [--events N,...]`.

Fills one log per size in `--events` (default 200,000 and 1,000,000; PostgreSQL, or
`--backend sqlite`): streams of 100 events appended in one batch each, every event
with a correlation id. Then runs, interleaved round by round, each command as the
user does, in a process of its own, its output read whole as it comes:

- `log`, piped: the table as a pipe gets it (tab-separated);
- `log`, terminal: the table on a pseudo-terminal 120 columns wide (aligned);
- `log --json`: NDJSON, an event a line, the reference;
- `export --out -`: NDJSON with every field, what an export writes;
- `--version`: start-up alone (its imports), which every time above includes.

For each: the time to the first row (from the start of the process, its start-up
included: what a user waits for), the time to the end, and the process's peak memory
(its maximum resident set). Goals: the piped and the terminal table within 2x of
`--json`, the ratio being the median over rounds of the two times of the same round;
the first row within a second; memory that does not grow with the log.
"""

from __future__ import annotations

import argparse
import os
import pty
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import psycopg
from eventcraft.eventstore import EventStore, NewEvent

from .contenders import PG, reset_schema

COMMANDS: dict[str, tuple[list[str], bool, int]] = {
    # name: (arguments, on a terminal, lines before the first row)
    "log (piped)": (["log"], False, 1),
    "log (terminal)": (["log"], True, 2),
    "log --json": (["log", "--json"], False, 0),
    "export --out -": (["export", "--out", "-"], False, 0),
    "--version": (["--version"], False, 0),  # start-up alone: the imports, no store
}
REFERENCE = "log --json"


@dataclass(frozen=True)
class Run:
    first_row: float
    """Seconds from the start of the process to the first row read."""
    seconds: float
    """Seconds from the start of the process to its end."""
    peak_bytes: int
    """The process's maximum resident set."""


def fill(url: str, events: int) -> None:
    with EventStore.open(url) as store:
        for start in range(0, events, 100):
            store.append(
                f"account-{start // 100}",
                [
                    NewEvent(
                        "Deposited" if n % 3 else "Withdrawn",
                        {"amount": n * 7 % 1000, "currency": "EUR", "note": f"entry {n}"},
                        {"correlation_id": f"c-{start + n}", "user": "bench"},
                    )
                    for n in range(min(100, events - start))
                ],
            )


def run(url: str, arguments: list[str], on_terminal: bool, header_lines: int) -> Run:
    """`eventcraft --store URL ARGUMENTS`, its output read as it comes and thrown away."""
    environment = {**os.environ, "COLUMNS": "120", "LINES": "40"}
    command = [sys.executable, "-m", "eventcraft", "--store", url, *arguments]
    if on_terminal:
        reader, writer = pty.openpty()
    else:
        reader, writer = os.pipe()
    began = time.perf_counter()
    process = subprocess.Popen(command, stdout=writer, env=environment)
    os.close(writer)
    first_row = 0.0
    lines = 0
    try:
        while chunk := os.read(reader, 1 << 16):
            if not first_row:
                lines += chunk.count(b"\n")
                if lines > header_lines:
                    first_row = time.perf_counter() - began
    except OSError:  # a terminal's other end closed
        pass
    finally:
        os.close(reader)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - began
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(arguments)} ended with {process.returncode}")
    return Run(first_row, seconds, usage.ru_maxrss * 1024)


def drop_schema(name: str) -> None:
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", default="200000,1000000", help="log sizes, comma-separated")
    parser.add_argument("--backend", choices=("postgres", "sqlite"), default="postgres")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(size) for size in args.events.split(",")]

    with tempfile.TemporaryDirectory() as folder:
        urls = {}
        for size in sizes:
            if args.backend == "postgres":
                reset_schema(f"bench_cli_{size}")
                urls[size] = f"{PG}?schema=bench_cli_{size}"
            else:
                urls[size] = f"sqlite:///{Path(folder) / f'events_{size}.db'}"
            began = time.perf_counter()
            fill(urls[size], size)
            print(f"filled {size:,} events in {time.perf_counter() - began:.1f} s", flush=True)

        runs: dict[tuple[int, str], list[Run]] = defaultdict(list)
        ratios: dict[tuple[int, str], list[float]] = defaultdict(list)
        for r in range(args.rounds):
            for size in sizes:
                order = list(COMMANDS.items())
                for name, (arguments, on_terminal, header) in order if r % 2 else order[::-1]:
                    runs[size, name].append(run(urls[size], arguments, on_terminal, header))
                reference = runs[size, REFERENCE][-1].seconds
                for name in COMMANDS:
                    ratios[size, name].append(runs[size, name][-1].seconds / reference)
                print(
                    f"  round {r + 1}, {size:,} events: "
                    + ", ".join(
                        f"{name} {runs[size, name][-1].seconds:.1f} s" for name in COMMANDS
                    ),
                    flush=True,
                )
        if args.backend == "postgres":
            for size in sizes:
                drop_schema(f"bench_cli_{size}")

    print()
    print(
        f"{'events':>10} {'command':<16} {'first row':>10} {'whole':>8} "
        f"{'x --json':>9} {'peak MB':>8} {'goal':>7}"
    )
    for size in sizes:
        for name in COMMANDS:
            done = runs[size, name]
            first = statistics.median(d.first_row for d in done)
            whole = statistics.median(d.seconds for d in done)
            ratio = statistics.median(ratios[size, name])
            peak = max(d.peak_bytes for d in done) / 1e6
            goal = "" if not name.startswith("log (") else ("met" if ratio <= 2 else "MISSED")
            print(
                f"{size:>10,} {name:<16} {first:>9.2f}s {whole:>7.1f}s "
                f"{ratio:>8.2f}x {peak:>8.0f} {goal:>7}"
            )


if __name__ == "__main__":
    main()
