"""Group commit: single-event appends from 1 to 64 concurrent callers, each to a stream
of its own, through the store with grouping on and off, beside raw one-insert-per-
transaction inserts at the same concurrency, in one run; on SQLite also 4 threads
appending 50-event batches beside the `eventsourcing` library's SQLite recorder.

    python -m benchmarks.group_commit [--backends postgres,sqlite] [--callers 1,4,16,64]
                                      [--appends 2000] [--rounds 2]

Contenders are measured round by round, interleaved, each on a fresh table, so that
the machine's load falls on all alike. Printed: events/s, p50 and p99 latency of one
call, and the ratios the goals of issue 19 are stated in.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import psycopg
from eventcraft.eventstore import AsyncEventStore, EventStore, NewEvent, new_event_id

from .contenders import PG, payload, reset_schema
from .record import Record

RAW_TABLE = """CREATE TABLE raw_events (
    position {serial} PRIMARY KEY, stream_id text NOT NULL, version bigint NOT NULL,
    id {uuid} NOT NULL UNIQUE, type text NOT NULL, data {json} NOT NULL,
    recorded_at {time} NOT NULL DEFAULT {now}, UNIQUE (stream_id, version))"""
RAW_INSERT = "INSERT INTO raw_events (stream_id, version, id, type, data) VALUES ({marks})"


class Measured:
    """One contender's run: how long, and each call's latency."""

    def __init__(self, seconds: float, calls: list[float], events: int) -> None:
        self.seconds = seconds
        self.calls = calls
        self.events = events

    @property
    def rate(self) -> float:
        return self.events / self.seconds


def run_threads(
    callers: int, total: int, work: Callable[[int, int, list[float]], None]
) -> Measured:
    """`work(caller, count, latencies)` on `callers` threads started together."""
    shares = [total // callers + (1 if c < total % callers else 0) for c in range(callers)]
    latencies: list[list[float]] = [[] for _ in range(callers)]
    start = threading.Barrier(callers + 1)

    def body(caller: int) -> None:
        start.wait()
        work(caller, shares[caller], latencies[caller])

    threads = [threading.Thread(target=body, args=(c,)) for c in range(callers)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - began
    return Measured(seconds, [x for mine in latencies for x in mine], total)


def store_appends(url: str, grouped: bool, callers: int, total: int) -> Measured:
    with EventStore.open(url, group_commit=grouped) as store:

        def work(caller: int, count: int, latencies: list[float]) -> None:
            stream = f"account-{uuid.uuid4().hex}"
            for n in range(count):
                began = time.perf_counter()
                store.append(stream, [NewEvent("Deposited", payload(n))], n)
                latencies.append(time.perf_counter() - began)

        return run_threads(callers, total, work)


def task_appends(url: str, grouped: bool, callers: int, total: int) -> Measured:
    async def run() -> Measured:
        async with await AsyncEventStore.open(url, group_commit=grouped) as store:
            latencies: list[float] = []

            async def writer(count: int) -> None:
                stream = f"account-{uuid.uuid4().hex}"
                for n in range(count):
                    began = time.perf_counter()
                    await store.append(stream, [NewEvent("Deposited", payload(n))], n)
                    latencies.append(time.perf_counter() - began)

            shares = [total // callers + (1 if c < total % callers else 0) for c in range(callers)]
            began = time.perf_counter()
            await asyncio.gather(*(writer(share) for share in shares))
            return Measured(time.perf_counter() - began, latencies, total)

    return asyncio.run(run())


def raw_postgres(schema: str, callers: int, total: int) -> Measured:
    options = f"-c search_path={schema}"
    with psycopg.connect(PG, autocommit=True, options=options) as conn:
        conn.execute(
            RAW_TABLE.format(
                serial="bigserial", uuid="uuid", json="jsonb", time="timestamptz", now="now()"
            )
        )
    insert = RAW_INSERT.format(marks="%s, %s, %s, %s, %s::jsonb")
    connections = [psycopg.connect(PG, autocommit=True, options=options) for _ in range(callers)]

    def work(caller: int, count: int, latencies: list[float]) -> None:
        conn, stream = connections[caller], f"account-{uuid.uuid4().hex}"
        for n in range(count):
            began = time.perf_counter()
            data = orjson.dumps(payload(n)).decode()
            conn.execute(insert, (stream, n + 1, uuid.uuid4(), "Deposited", data))
            latencies.append(time.perf_counter() - began)

    try:
        return run_threads(callers, total, work)
    finally:
        for conn in connections:
            conn.close()


def raw_sqlite(path: str, callers: int, total: int) -> Measured:
    with sqlite3.connect(path, isolation_level=None) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(
            RAW_TABLE.format(
                serial="INTEGER", uuid="BLOB", json="TEXT", time="TEXT", now="CURRENT_TIMESTAMP"
            )
        )
    insert = RAW_INSERT.format(marks="?, ?, ?, ?, ?")
    connections = [
        sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=60)
        for _ in range(callers)
    ]

    def work(caller: int, count: int, latencies: list[float]) -> None:
        conn, stream = connections[caller], f"account-{uuid.uuid4().hex}"
        for n in range(count):
            began = time.perf_counter()
            data = orjson.dumps(payload(n)).decode()
            conn.execute(insert, (stream, n + 1, uuid.uuid4().bytes, "Deposited", data))
            latencies.append(time.perf_counter() - began)

    try:
        return run_threads(callers, total, work)
    finally:
        for conn in connections:
            conn.close()


def store_batches(url: str, grouped: bool, threads: int, batches: int, size: int) -> Measured:
    with EventStore.open(url, group_commit=grouped) as store:

        def work(caller: int, count: int, latencies: list[float]) -> None:
            for _ in range(count):
                events = [NewEvent("Deposited", payload(n)) for n in range(size)]
                began = time.perf_counter()
                store.append(f"account-{uuid.uuid4().hex}", events, 0)
                latencies.append(time.perf_counter() - began)

        measured = run_threads(threads, batches, work)
    return Measured(measured.seconds, measured.calls, batches * size)


def library_batches(path: str, threads: int, batches: int, size: int) -> Measured:
    """The `eventsourcing` library's SQLite recorder, 50-event batches as `store_batches`."""
    from eventsourcing.persistence import StoredEvent
    from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteDatastore

    datastore = SQLiteDatastore(path)
    recorder = SQLiteApplicationRecorder(datastore)
    recorder.create_table()

    def work(caller: int, count: int, latencies: list[float]) -> None:
        for _ in range(count):
            originator = uuid.uuid4()
            events = [
                StoredEvent(originator, n + 1, "bench:Deposited", orjson.dumps(payload(n)))
                for n in range(size)
            ]
            began = time.perf_counter()
            recorder.insert_events(events)
            latencies.append(time.perf_counter() - began)

    try:
        measured = run_threads(threads, batches, work)
    finally:
        datastore.close()
    return Measured(measured.seconds, measured.calls, batches * size)


def floor_batches(path: str, threads: int, batches: int, size: int) -> Measured:
    """The statements our store runs for each batch, from raw sqlite3 with the rows made
    beforehand: what any code on our schema pays, the floor under `store_batches`."""
    EventStore.open(f"sqlite:///{path}").close()  # our schema, made by the store itself
    datas = [orjson.dumps(payload(n)).decode() for n in range(size)]
    connections = [
        sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=60)
        for _ in range(threads)
    ]
    writer = threading.Lock()  # writers take turns here, not in SQLite's sleeping busy wait

    def work(caller: int, count: int, latencies: list[float]) -> None:
        conn = connections[caller]
        for _ in range(count):
            stream, now = f"account-{uuid.uuid4().hex}", datetime.now(UTC).isoformat()
            ids = [new_event_id().bytes for _ in range(size)]
            began = time.perf_counter()
            with writer:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute(FLOOR_DELETED, (stream,)).fetchall()
                conn.execute(FLOOR_VERSION, (stream,)).fetchall()
                (first,) = conn.execute(FLOOR_POSITION).fetchone()
                rows = [
                    (first + n, stream, n + 1, ids[n], "Deposited", datas[n], "{}", now, "account")
                    for n in range(size)
                ]
                conn.executemany(FLOOR_INSERT, rows)
                conn.execute(FLOOR_STREAM, (stream, "account"))
                conn.execute("COMMIT")
            latencies.append(time.perf_counter() - began)

    try:
        measured = run_threads(threads, batches, work)
    finally:
        for conn in connections:
            conn.close()
    return Measured(measured.seconds, measured.calls, batches * size)


FLOOR_DELETED = "SELECT version FROM eventcraft_deleted_streams WHERE stream_id = ?"
FLOOR_VERSION = "SELECT coalesce(max(version), 0) FROM eventcraft_events WHERE stream_id = ?"
FLOOR_POSITION = "SELECT coalesce(max(position), 0) + 1 FROM eventcraft_events"
FLOOR_INSERT = (
    "INSERT INTO eventcraft_events (position, stream_id, version, id, type, data, metadata, "
    "recorded_at, category) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
FLOOR_STREAM = "INSERT INTO eventcraft_streams (stream_id, category) VALUES (?, ?)"


def lone_latencies(url: str, count: int) -> tuple[float, float]:
    """Median latency of a lone caller's append with grouping on and off, the two taken
    turn about on one store, so that the machine's load falls on both alike."""
    with EventStore.open(url) as grouped, EventStore.open(url, group_commit=False) as alone:
        streams = (f"account-{uuid.uuid4().hex}", f"account-{uuid.uuid4().hex}")
        times: tuple[list[float], list[float]] = ([], [])
        for n in range(count):
            for store, stream, taken in zip((grouped, alone), streams, times, strict=True):
                began = time.perf_counter()
                store.append(stream, [NewEvent("Deposited", payload(n))], n)
                taken.append(time.perf_counter() - began)
    return statistics.median(times[0]), statistics.median(times[1])


def fresh_postgres(name: str) -> str:
    reset_schema(name)
    return f"{PG}?schema={name}"


def fresh_sqlite(folder: Path) -> str:
    return str(folder / f"{uuid.uuid4().hex}.db")


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="postgres,sqlite")
    parser.add_argument("--callers", default="1,4,16,64")
    parser.add_argument("--appends", type=int, default=2000, help="appends per measurement")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--batches", type=int, default=400, help="50-event batches per measurement (SQLite)"
    )
    parser.add_argument("--prefix", default="bench_gc", help="of the PostgreSQL schemas")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args()
    callers = [int(c) for c in args.callers.split(",")]
    record = Record("group_commit", args, postgres=PG if "postgres" in args.backends else "")
    results: dict[str, Any] = {"lone": [], "singles": [], "batches": None}
    with tempfile.TemporaryDirectory() as folder:
        for backend in args.backends.split(","):
            url = (
                fresh_postgres(f"{args.prefix}_lone")
                if backend == "postgres"
                else f"sqlite:///{fresh_sqlite(Path(folder))}"
            )
            grouped, alone = lone_latencies(url, args.appends)
            print(
                f"\n{backend}, a lone caller, appends taken turn about: median "
                f"{grouped * 1e6:.0f} us grouped, {alone * 1e6:.0f} us ungrouped "
                f"({grouped / alone:.3f}x)"
            )
            results["lone"].append(
                {
                    "backend": backend,
                    "appends": args.appends,
                    "grouped_us": grouped * 1e6,
                    "ungrouped_us": alone * 1e6,
                    "ratio": grouped / alone,
                }
            )
            for count in callers:
                found = report_singles(
                    backend, count, args.appends, args.rounds, Path(folder), args.prefix
                )
                results["singles"].append(found)
        if "sqlite" in args.backends:
            results["batches"] = report_batches(Path(folder), args.rounds, batches=args.batches)
    if args.json:
        record.write(args.json, results)


def report_singles(
    backend: str, callers: int, appends: int, rounds: int, folder: Path, prefix: str = "bench_gc"
) -> dict[str, Any]:
    """Each contender's best round at `callers` callers, printed; its figures for the record."""
    contenders: dict[str, Callable[[], Measured]]
    if backend == "postgres":
        contenders = {
            "grouped": lambda: store_appends(
                fresh_postgres(f"{prefix}_on"), True, callers, appends
            ),
            "ungrouped": lambda: store_appends(
                fresh_postgres(f"{prefix}_off"), False, callers, appends
            ),
            "async grouped": lambda: task_appends(
                fresh_postgres(f"{prefix}_async"), True, callers, appends
            ),
            "raw": lambda: raw_postgres(_schema(f"{prefix}_raw"), callers, appends),
        }
    else:
        contenders = {
            "grouped": lambda: store_appends(
                f"sqlite:///{fresh_sqlite(folder)}", True, callers, appends
            ),
            "ungrouped": lambda: store_appends(
                f"sqlite:///{fresh_sqlite(folder)}", False, callers, appends
            ),
            "raw": lambda: raw_sqlite(fresh_sqlite(folder), callers, appends),
        }
    runs: dict[str, list[Measured]] = defaultdict(list)
    for _ in range(rounds):
        for name, run in contenders.items():
            runs[name].append(run())
    best = {name: max(measured, key=lambda m: m.rate) for name, measured in runs.items()}
    raw = best["raw"].rate
    print(f"\n{backend}, {callers} concurrent caller(s), {appends} single-event appends:")
    print(f"  {'':15} {'events/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'/ raw':>6}")
    figures = []
    for name, measured in best.items():
        p50 = percentile(measured.calls, 0.5) * 1000
        p99 = percentile(measured.calls, 0.99) * 1000
        print(f"  {name:15} {measured.rate:9.0f} {p50:8.2f} {p99:8.2f} {measured.rate / raw:6.2f}")
        figures.append(
            {
                "name": name,
                "events_per_s": measured.rate,
                "p50_ms": p50,
                "p99_ms": p99,
                "per_raw": measured.rate / raw,
            }
        )
    ratio = best["grouped"].rate / best["ungrouped"].rate
    lone = statistics.median(best["grouped"].calls) / statistics.median(best["ungrouped"].calls)
    print(f"  grouped / ungrouped: {ratio:.2f}x the rate, {lone:.2f}x the median latency")
    return {
        "backend": backend,
        "callers": callers,
        "appends": appends,
        "contenders": figures,
        "grouped_over_ungrouped_rate": ratio,
        "grouped_over_ungrouped_median_latency": lone,
    }


def report_batches(
    folder: Path, rounds: int, threads: int = 4, batches: int = 400
) -> dict[str, Any]:
    """SQLite's 50-event batches by each contender, printed; the figures for the record."""
    size = 50
    contenders: dict[str, Callable[[], Measured]] = {
        "grouped": lambda: store_batches(
            f"sqlite:///{fresh_sqlite(folder)}", True, threads, batches, size
        ),
        "ungrouped": lambda: store_batches(
            f"sqlite:///{fresh_sqlite(folder)}", False, threads, batches, size
        ),
        "eventsourcing": lambda: library_batches(fresh_sqlite(folder), threads, batches, size),
        "raw, our rows": lambda: floor_batches(fresh_sqlite(folder), threads, batches, size),
    }
    runs: dict[str, list[float]] = defaultdict(list)
    for _ in range(rounds):
        for name, run in contenders.items():
            runs[name].append(run().rate)
    library = statistics.median(runs["eventsourcing"])
    print(f"\nsqlite, {threads} threads appending {size}-event batches ({batches} batches):")
    figures = []
    for name, rates in runs.items():
        rate = statistics.median(rates)
        print(f"  {name:15} {rate:9.0f} events/s  {rate / library:5.2f}x eventsourcing")
        figures.append({"name": name, "events_per_s": rate, "per_eventsourcing": rate / library})
    return {"threads": threads, "size": size, "batches": batches, "contenders": figures}


def _schema(name: str) -> str:
    reset_schema(name)
    return name


if __name__ == "__main__":
    main()
