"""The Spark replay benchmark: `python -m benchmarks.spark` (in `make bench`).

A balance-per-account fold replayed over logs of 1,000,000 and 10,000,000
events (20 per account), generated into PostgreSQL and exported into the
Parquet archive, in one run:

- the in-process rebuild (`ProjectionRunner.rebuild`), the reference;
- Spark in local mode with 1 and then 2 cores, reading the archive, then
  reading the store (through the JDBC source where the driver is there,
  which the line says); each replay end to end (read, fold, write, swap
  with the checkpoint), the median of the runs after the first; the
  session's start, and the first run (which also warms the JVM), reported
  apart; and the export to the archive;
- for the fold with a Python `apply` and for the same balance declared
  with reducers (`ReducerFold`: a `Sum` and a `Count`, folded by Spark SQL),
  each beside its own in-process rebuild; the reducer fold also from an
  archive exported without its data stored parsed (`parsed=False`).

Prints events/s, seconds, the speed-up from 1 to 2 cores, and the number
of cores at which Spark overtakes the in-process rebuild (measured, or
extrapolated from the per-core rate when two cores are not enough).
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import shutil
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from eventcraft.eventstore import EventStore, NewEvent
from eventcraft.projections import ProjectionRunner, ReducerFold, StreamKey
from eventcraft.projections.reducers import Count, Sum
from eventcraft.projections.spark import Archive, replay, spark_session

from .contenders import PG, payload
from .projections import balances
from .record import Record

PER_ACCOUNT = 20
WRITERS = 3
ARCHIVES = Path(__file__).resolve().parent.parent / ".bench" / "archives"

reduced = ReducerFold(
    "bench-reduced-balances",
    table=sa.Table(
        "bench_reduced_balances",
        sa.MetaData(),
        sa.Column("account_id", sa.Text, primary_key=True),
        sa.Column("balance", sa.BigInteger, nullable=False),
        sa.Column("deposits", sa.BigInteger, nullable=False),
    ),
    key=StreamKey(),
    columns={"balance": Sum("amount_cents"), "deposits": Count(types="Deposited")},
)
FOLDS = {"apply": balances, "reducers": reduced}
UNPARSED = "from the archive, data unparsed"


def settings(cores: int) -> dict[str, str]:
    """Spark's defaults, but for the UI and a driver (in local mode, the executor) of 4 GB."""
    return {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.memory": "4g",
        "spark.sql.shuffle.partitions": str(cores),
        "spark.default.parallelism": str(cores),
    }


def _write(url: str, accounts: int) -> None:
    with EventStore.open(url) as store:
        for _ in range(accounts):
            batch = [NewEvent("Deposited", payload(n)) for n in range(PER_ACCOUNT)]
            store.append(f"account-{uuid.uuid4().hex}", batch, 0)


def cpu_seconds() -> float:
    """CPU time of this process and every process under it (the JVM, Python workers).

    Spark's "1 core" is one task thread; the JVM's other threads and the
    Python worker run beside it, so a local[1] job can keep more than one
    CPU busy. This shows how many.
    """
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    times: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended while we looked
        children.setdefault(int(fields[1]), []).append(int(entry.name))
        # Its own time and its reaped children's: a Python worker that ended still counts.
        times[int(entry.name)] = sum(int(field) for field in fields[11:15]) / tick
    total, pending = 0.0, [os.getpid()]
    while pending:
        pid = pending.pop()
        total += times.get(pid, 0.0)
        pending.extend(children.get(pid, []))
    return total


def fill(url: str, events: int) -> float | None:
    """Top the log up to `events`, with writer processes (one append per account); the
    seconds it took, None when the log was there."""
    with EventStore.open(url) as store:
        missing = events - store.high_water_mark()
    if missing <= 0:
        return None
    accounts = -(-missing // PER_ACCOUNT)
    started = time.perf_counter()
    context = multiprocessing.get_context("spawn")
    share = [accounts // WRITERS + (1 if i < accounts % WRITERS else 0) for i in range(WRITERS)]
    writers = [context.Process(target=_write, args=(url, n)) for n in share]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
        assert writer.exitcode == 0, "a writer failed"
    took = time.perf_counter() - started
    print(f"  generated {missing:,} events in {took:.0f} s", flush=True)
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000000,10000000", help="log sizes, comma-separated")
    parser.add_argument("--cores", default="1,2", help="local Spark cores, comma-separated")
    parser.add_argument("--rounds", type=int, default=3, help="replays per source, first warms up")
    parser.add_argument("--fresh", action="store_true", help="regenerate logs and archives")
    parser.add_argument(
        "--store-up-to",
        type=int,
        default=10_000_000,
        help="replay from PostgreSQL only for logs up to this size (it is the slow source)",
    )
    parser.add_argument("--prefix", default="bench_spark", help="of the logs' schemas")
    parser.add_argument("--archives", type=Path, default=ARCHIVES, help="where archives go")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args()
    record = Record("spark", args, postgres=PG)
    results: list[dict[str, Any]] = []
    rounds = max(args.rounds, 2)
    cores_list = [int(c) for c in args.cores.split(",")]
    print("replay of a balance-per-account fold (PostgreSQL 15; Spark in local mode)")
    for size in (int(s) for s in args.sizes.split(",")):
        schema = f"{args.prefix}_{size}"
        url = f"{PG}?schema={schema}"
        archive_path = args.archives / schema
        if args.fresh:
            from .contenders import reset_schema

            reset_schema(schema)
            shutil.rmtree(archive_path, ignore_errors=True)
        print(f"\n{size:,} events", flush=True)
        at_size: dict[str, Any] = {"size": size, "generated_seconds": fill(url, size)}
        at_size.update(in_process=[], cores=[])
        results.append(at_size)
        rates: dict[str, float] = {}
        with EventStore.open(url) as store, ProjectionRunner(store, [balances, reduced]) as runner:
            for kind, fold in FOLDS.items():
                cpu, started = cpu_seconds(), time.perf_counter()
                events = runner.rebuild(fold.name).events
                seconds = time.perf_counter() - started
                cpus = (cpu_seconds() - cpu) / seconds
                rates[f"in-process {kind}"] = events / seconds
                at_size["in_process"].append(
                    {
                        "fold": kind,
                        "events": events,
                        "seconds": seconds,
                        "events_per_s": events / seconds,
                        "cpus": cpus,
                    }
                )
                print(
                    f"  {f'in-process rebuild ({kind})':<34} {seconds:>7.1f} s "
                    f"{events / seconds:>10,.0f} ev/s {cpus:>5.2f} CPUs busy (and PostgreSQL's)",
                    flush=True,
                )
        for cores in cores_list:
            started = time.perf_counter()
            spark = spark_session(f"local[{cores}]", settings=settings(cores))
            spark.range(1).count()
            session_start = time.perf_counter() - started
            print(f"  spark local[{cores}]: session start {session_start:.1f} s")
            with_cores: dict[str, Any] = {"cores": cores, "session_start_seconds": session_start}
            with_cores.update(export=None, replays=[])
            at_size["cores"].append(with_cores)
            # Each core count exports the whole log, into an archive of its own making.
            shutil.rmtree(archive_path, ignore_errors=True)
            archive = Archive(str(archive_path))
            started = time.perf_counter()
            exported = archive.export(spark, url)
            if exported.events:
                took = time.perf_counter() - started
                rates[f"{cores} export"] = exported.events / took
                with_cores["export"] = {
                    "read_path": exported.read_path,
                    "events": exported.events,
                    "seconds": took,
                    "events_per_s": exported.events / took,
                }
                print(
                    f"    {f'export to the archive ({exported.read_path})':<32} {took:>7.1f} s "
                    f"{exported.events / took:>10,.0f} ev/s",
                    flush=True,
                )
            # The same log without the data stored parsed: what reducer folds read before.
            unparsed = Archive(str(archive_path) + "-unparsed", parsed=False)
            shutil.rmtree(unparsed.path, ignore_errors=True)
            unparsed.export(spark, url)
            with_cores["archive_mb"] = _megabytes(archive_path)
            with_cores["unparsed_archive_mb"] = _megabytes(Path(unparsed.path))
            print(
                f"    archive {_megabytes(archive_path):.1f} MB, "
                f"{_megabytes(Path(unparsed.path)):.1f} MB without the data parsed",
                flush=True,
            )
            sources = {
                "from the Parquet archive": archive,
                UNPARSED: unparsed,
                "from PostgreSQL": None,
            }
            for label, source in sources.items():
                if label == "from PostgreSQL" and size > args.store_up_to:
                    continue
                for kind, fold in FOLDS.items():
                    if label == UNPARSED and kind != "reducers":
                        continue
                    # The first job of a session also warms the JVM's JIT: shown, not counted.
                    runs, busy = [], []
                    for _ in range(rounds):
                        cpu = cpu_seconds()
                        runs.append(replay(fold, url, spark=spark, source=source))
                        busy.append((cpu_seconds() - cpu) / runs[-1].seconds)
                    cold, warm = runs[0], statistics.median(r.seconds for r in runs[1:])
                    rate = runs[0].events / warm
                    rates[f"{cores} {label} {kind}"] = rate
                    cpus = statistics.median(busy[1:])
                    path = f"{kind}, {cold.read_path}{' by key' if cold.by_key else ''}"
                    with_cores["replays"].append(
                        {
                            "source": label,
                            "fold": kind,
                            "read_path": cold.read_path,
                            "by_key": cold.by_key,
                            "events": runs[0].events,
                            "seconds": warm,
                            "events_per_s": rate,
                            "cpus": cpus,
                            "first_run_seconds": cold.seconds,
                        }
                    )
                    print(
                        f"    replay {label} ({path}){'':<{max(0, 14 - len(path))}} "
                        f"{warm:>7.1f} s {rate:>10,.0f} ev/s "
                        f"{cpus:>5.2f} CPUs busy (first run {cold.seconds:.1f} s)",
                        flush=True,
                    )
            spark.stop()
            shutil.rmtree(unparsed.path, ignore_errors=True)
        at_size["summary"] = _summary(rates, cores_list)
        if args.json:
            # After each size: a run stopped in a later one keeps what it measured.
            record.write(args.json, {"sizes": results})


def _megabytes(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def _summary(rates: dict[str, float], cores_list: list[int]) -> list[dict[str, Any]]:
    """Each source and fold's speed-up from 1 to 2 cores and the cores at which it overtakes
    the in-process rebuild, printed; the same for the record."""
    found: list[dict[str, Any]] = []
    for label in ("from the Parquet archive", UNPARSED, "from PostgreSQL"):
        for kind in FOLDS:
            reference = rates[f"in-process {kind}"]
            by_cores = {
                c: rates[f"{c} {label} {kind}"]
                for c in cores_list
                if f"{c} {label} {kind}" in rates
            }
            if not by_cores:
                continue
            line = f"  {label} ({kind}): "
            speedup = None
            if 1 in by_cores and 2 in by_cores:
                speedup = by_cores[2] / by_cores[1]
                line += f"1 -> 2 cores x{speedup:.2f}; "
            overtakes = [c for c in sorted(by_cores) if by_cores[c] > reference]
            if overtakes:
                needed = overtakes[0]
                line += f"overtakes the in-process rebuild at {needed} core(s)"
            else:
                most = max(by_cores)
                needed = math.ceil(reference / (by_cores[most] / most))
                line += f"overtakes the in-process rebuild at ~{needed} cores (extrapolated)"
            print(line, flush=True)
            found.append(
                {
                    "source": label,
                    "fold": kind,
                    "speedup_1_to_2_cores": speedup,
                    "overtakes_at_cores": needed,
                    "extrapolated": not overtakes,
                }
            )
    return found


if __name__ == "__main__":
    main()
