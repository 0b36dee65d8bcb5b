"""Export, import and verify on PostgreSQL: `python -m benchmarks.transfer [--events N]`.

Fills a log of `--events` events (streams of `--stream-length`, each appended in
one batch, in turn), then times, interleaved round by round in one run:

- export: `operations.transfer.export_events` to a file (by one process, and by
  `--jobs` worker processes), beside a raw
  `COPY (SELECT ... ORDER BY position) TO STDOUT` of the same columns to a file;
- import: `operations.transfer.import_events` of that export into a new store
  (checked whole first, and with `check=False`, as `import --no-check`),
  beside a raw `COPY eventcraft_events FROM STDIN` of the raw copy's data into a
  new store's table (same table, indexes and triggers; the raw copy skips the
  streams catalogue and every check);
- verify: `operations.verify.verify` of the log, against the 30 s goal.

Goals: export at least 50% of raw COPY TO, import at least 40% of raw COPY FROM.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from functools import partial
from pathlib import Path

import psycopg
from eventcraft.eventstore import EventStore, NewEvent

from eventcraft.operations.transfer import export_events, import_events
from eventcraft.operations.verify import verify

from .contenders import PG, reset_schema

SOURCE = "bench_transfer_source"
TARGET = "bench_transfer_target"
COLUMNS = "id, stream_id, version, position, type, data, metadata, recorded_at, category"


def url(schema: str) -> str:
    return f"{PG}?schema={schema}"


def fill(events: int, stream_length: int) -> None:
    reset_schema(SOURCE)
    with EventStore.open(url(SOURCE)) as store:
        for start in range(0, events, stream_length):
            count = min(stream_length, events - start)
            store.append(
                f"account-{start // stream_length}",
                [
                    NewEvent(
                        "Deposited" if n % 3 else "Withdrawn",
                        {"amount": n * 7 % 1000, "currency": "EUR", "note": f"entry {n}"},
                        {"correlation_id": f"c-{start + n}", "user": "bench"},
                    )
                    for n in range(count)
                ],
            )


def ours_export(path: Path, jobs: int = 1) -> int:
    with EventStore.open(url(SOURCE)) as store, path.open("wb") as out:
        return export_events(store, out, jobs=jobs).events


def raw_export(path: Path) -> None:
    query = f"COPY (SELECT {COLUMNS} FROM eventcraft_events ORDER BY position) TO STDOUT"
    with psycopg.connect(url(SOURCE).split("?")[0]) as conn, path.open("wb") as out:
        conn.execute(f"SET search_path TO {SOURCE}")
        with conn.cursor().copy(query) as copy:
            for block in copy:
                out.write(block)


def fresh_target() -> None:
    reset_schema(TARGET)
    EventStore.open(url(TARGET)).close()  # the store's tables, indexes and functions


def ours_import(path: Path, check: bool = True) -> int:
    with EventStore.open(url(TARGET)) as store, path.open("rb") as source:
        return import_events(store, source, check=check).written


def raw_import(path: Path) -> None:
    with psycopg.connect(PG) as conn, path.open("rb") as source:
        conn.execute(f"SET search_path TO {TARGET}")
        with conn.cursor().copy(f"COPY eventcraft_events ({COLUMNS}) FROM STDIN") as copy:
            while block := source.read(1 << 20):
                copy.write(block)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--stream-length", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=2, help="worker processes of the shared export")
    args = parser.parse_args()

    started = time.perf_counter()
    print(f"filling a log of {args.events:,} events", flush=True)
    fill(args.events, args.stream_length)
    print(f"  filled in {time.perf_counter() - started:.1f} s", flush=True)

    rates: dict[str, list[float]] = defaultdict(list)
    ratios: dict[str, list[float]] = defaultdict(list)
    with tempfile.TemporaryDirectory() as folder:
        ours_file, raw_file = Path(folder) / "ours.ndjson", Path(folder) / "raw.copy"
        for r in range(args.rounds):
            shared = partial(ours_export, jobs=args.jobs)
            order: list[tuple[str, Callable[[Path], object], Path]] = [
                ("ours", ours_export, ours_file),
                ("raw", raw_export, raw_file),
                ("jobs", shared, Path(folder) / "shared.ndjson"),
            ]
            seconds = {}
            for name, call, path in order if r % 2 == 0 else order[::-1]:
                began = time.perf_counter()
                call(path)
                seconds[name] = time.perf_counter() - began
                rates[f"export {name}"].append(args.events / seconds[name])
            ratios["export"].append(seconds["raw"] / seconds["ours"])
            ratios["export jobs"].append(seconds["raw"] / seconds["jobs"])

            imports: list[tuple[str, Callable[[Path], object], Path]] = [
                ("ours", ours_import, ours_file),
                ("unchecked", partial(ours_import, check=False), ours_file),
                ("raw", raw_import, raw_file),
            ]
            for name, call, path in imports if r % 2 == 0 else imports[::-1]:
                fresh_target()
                began = time.perf_counter()
                call(path)
                seconds[name] = time.perf_counter() - began
                rates[f"import {name}"].append(args.events / seconds[name])
            ratios["import"].append(seconds["raw"] / seconds["ours"])
            ratios["import unchecked"].append(seconds["raw"] / seconds["unchecked"])
            print(
                f"  round {r + 1}: export {ratios['export'][-1]:.0%} of COPY TO "
                f"({ratios['export jobs'][-1]:.0%} with --jobs {args.jobs}), "
                f"import {ratios['import'][-1]:.0%} of COPY FROM "
                f"({ratios['import unchecked'][-1]:.0%} with --no-check)",
                flush=True,
            )

    with EventStore.open(url(SOURCE)) as store:
        began = time.perf_counter()
        checked = verify(store)
        verify_seconds = time.perf_counter() - began
    assert checked.ok and checked.events == args.events, checked

    print()
    print(
        f"{'scenario':<16} {'eventcraft ev/s':>16} {'raw COPY ev/s':>14} {'ratio':>7} {'goal':>6}"
    )
    rows = (("export", "export ours", 0.5), ("export jobs", "export jobs", 0.5))
    import_rows = (("import", "import ours", 0.4), ("import unchecked", "import unchecked", 0.4))
    for scenario, ours_key, goal in (*rows, *import_rows):
        ours = statistics.median(rates[ours_key])
        raw = statistics.median(rates[f"{scenario.split()[0]} raw"])
        ratio = statistics.median(ratios[scenario])
        print(
            f"{scenario:<16} {ours:>16,.0f} {raw:>14,.0f} {ratio:>7.0%} "
            f"{'met' if ratio >= goal else 'MISSED':>6}"
        )
    print(
        f"{'verify':<16} {args.events / verify_seconds:>16,.0f} {'':>14} "
        f"{verify_seconds:>6.1f}s {'met' if verify_seconds < 30 else 'MISSED':>6}"
    )


if __name__ == "__main__":
    main()
