"""Retention by partition against row deletion on PostgreSQL: time and bloat.
`python -m benchmarks.partitions [--events 1000000] [--partition-events 100000]
[--rounds 2] [--json PATH]`.

Two stores of the same log, made afresh each round in schemas of their own: one
partitioned by `--partition-events` positions (`?partition_events=`), one not. The log is
`--events` events of category `old`, recorded 40 days ago in streams of 1,000, then a
tenth as many of category `live`. A run with the policy `old: older than 30 days`
archives the log up to its head (Parquet, the same for both) and removes every old event
but each stream's newest: on the unpartitioned store by deleting rows, on the
partitioned one by replacing each partition wholly below the mark by a table of its kept
rows (`eventstore/postgres/partition_retention.py`), deleting rows only in the partition
the mark straddles.

For each store: the run's time (and of it the removal's, the archive's), and the bloat
its tables keep: the heap and index bytes of the events (every partition) and of the key
table (a partitioned store's), and their dead rows, before the run, after it, and after
a plain VACUUM (timed), which makes dead rows' space reusable but returns none of it to
the system. Autovacuum is off on the benchmark's tables, so that what the run leaves is
what is measured. The stores go in turn, the order turned each round; the ratios are
partitioned over unpartitioned, the median of each round's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from eventcraft.eventstore import EventStore, NewEvent
from eventcraft.eventstore.retention import RetentionPolicy

from eventcraft.operations import retention

from .contenders import PG
from .record import Record

CONTENDERS = ("partitioned", "unpartitioned")
_STREAM = 1000
_BATCH = 1000
_SETTLED = 15.0
"""Seconds at most to wait for the statistics of dead rows to settle (a backend reports
its counts when it goes idle, up to a second later)."""

_TABLES = """
SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %s AND c.relkind = 'r'
  AND (c.relname = 'eventcraft_event_keys' OR c.relname = 'eventcraft_events'
       OR c.relname LIKE 'eventcraft\\_events\\_p%%')
"""
_MEASURE = f"""
WITH t AS ({_TABLES})
SELECT CASE WHEN c.relname = 'eventcraft_event_keys' THEN 'keys' ELSE 'events' END AS part,
       sum(pg_table_size(t.oid))::bigint, sum(pg_indexes_size(t.oid))::bigint,
       sum(coalesce(s.n_dead_tup, 0))::bigint, sum(coalesce(s.n_live_tup, 0))::bigint
FROM t JOIN pg_class c ON c.oid = t.oid LEFT JOIN pg_stat_user_tables s ON s.relid = t.oid
GROUP BY 1 ORDER BY 1
"""


def fill(url: str, events: int) -> float:
    """`events` old events in streams of 1,000, then a tenth as many live ones: seconds."""
    started = time.perf_counter()
    old = datetime.now(UTC) - timedelta(days=40)
    with EventStore.open(url) as store:
        for n in range(0, events, _BATCH):
            size = min(_BATCH, events - n)
            batch = [
                NewEvent("Logged", {"n": n + i, "note": "x" * 60}, recorded_at=old)
                for i in range(size)
            ]
            store.append(f"old-{n // _STREAM}", batch)
        live = max(events // 10, 1)
        for n in range(0, live, _BATCH):
            size = min(_BATCH, live - n)
            batch = [NewEvent("Logged", {"n": n + i, "note": "y" * 60}) for i in range(size)]
            store.append(f"live-{n // _STREAM}", batch)
    return time.perf_counter() - started


def measure(schema: str) -> dict[str, dict[str, int]]:
    """For the events (every partition) and the key table (a partitioned store's): heap and
    index bytes, dead and live rows, once the statistics have settled (the same twice, a
    second apart)."""
    deadline = time.monotonic() + _SETTLED
    last: list[tuple[object, ...]] | None = None
    with psycopg.connect(PG, autocommit=True) as conn:
        while True:
            conn.execute("SELECT pg_stat_clear_snapshot()")
            now = conn.execute(_MEASURE, (schema,)).fetchall()
            if now == last or time.monotonic() > deadline:
                break
            last = now
            time.sleep(1.0)
    names = ("table_bytes", "index_bytes", "dead_rows", "live_rows")
    found = {str(row[0]): dict(zip(names, (int(v) for v in row[1:]), strict=True)) for row in now}
    found["all"] = {name: sum(part[name] for part in found.values()) for name in names}
    return found


def _tables(conn: psycopg.Connection[Any], schema: str) -> list[str]:
    rows = conn.execute(
        f"SELECT c.oid::regclass::text FROM pg_class c WHERE c.oid IN ({_TABLES})", (schema,)
    ).fetchall()
    return [str(row[0]) for row in rows]


def no_autovacuum(schema: str) -> None:
    """Autovacuum off on the store's tables (each partition): what a run leaves stays."""
    with psycopg.connect(PG, autocommit=True) as conn:
        for table in _tables(conn, schema):
            conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)".encode())


def vacuum(schema: str) -> float:
    """A plain VACUUM of the store's tables: seconds."""
    started = time.perf_counter()
    with psycopg.connect(PG, autocommit=True) as conn:
        for table in _tables(conn, schema):
            conn.execute(f"VACUUM {table}".encode())
    return time.perf_counter() - started


def one(contender: str, events: int, partition_events: int, prefix: str) -> dict[str, Any]:
    """One store made, filled, measured, retained, measured, vacuumed, measured, dropped."""
    schema = f"{prefix}_{contender}_{uuid.uuid4().hex[:6]}"
    url = f"{PG}{'&' if '?' in PG else '?'}schema={schema}"
    if contender == "partitioned":
        url += f"&partition_events={partition_events}"
    try:
        filled = fill(url, events)
        no_autovacuum(schema)
        before = measure(schema)
        with EventStore.open(url) as store, tempfile.TemporaryDirectory() as folder:
            policies = [RetentionPolicy("old", max_age=timedelta(days=30))]
            started = time.perf_counter()
            report = retention.apply(store, policies, [], folder)
            took = time.perf_counter() - started
        after = measure(schema)
        vacuumed = vacuum(schema)
        after_vacuum = measure(schema)
    finally:
        with psycopg.connect(PG, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE".encode())
    return {
        "fill_seconds": filled,
        "run_seconds": took,
        "archive_seconds": report.archive_seconds,
        "remove_seconds": report.remove_seconds,
        "removed": report.run.removed,
        "up_to": report.run.up_to,
        "before": before,
        "after": after,
        "vacuum_seconds": vacuumed,
        "after_vacuum": after_vacuum,
    }


def _bytes(found: dict[str, dict[str, int]], part: str = "all") -> int:
    return found[part]["table_bytes"] + found[part]["index_bytes"] if part in found else 0


def summary(rounds: list[dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """Each store's medians over rounds, and partitioned over unpartitioned per round's
    pair, the median of those ratios."""

    def median(contender: str, pick: Any) -> float:
        return float(statistics.median(pick(r[contender]) for r in rounds))

    def ratio(pick: Any) -> float | None:
        pairs = [(pick(r["partitioned"]), pick(r["unpartitioned"])) for r in rounds]
        if any(b == 0 for _, b in pairs):
            return None
        return float(statistics.median(a / b for a, b in pairs))

    figures = {
        "remove_seconds": lambda r: r["remove_seconds"],
        "run_seconds": lambda r: r["run_seconds"],
        "bytes_before": lambda r: _bytes(r["before"]),
        "bytes_after": lambda r: _bytes(r["after"]),
        "bytes_after_vacuum": lambda r: _bytes(r["after_vacuum"]),
        "event_bytes_after": lambda r: _bytes(r["after"], "events"),
        "event_bytes_after_vacuum": lambda r: _bytes(r["after_vacuum"], "events"),
        "dead_rows_after": lambda r: r["after"]["all"]["dead_rows"],
        "vacuum_seconds": lambda r: r["vacuum_seconds"],
    }
    return {
        "medians": {c: {k: median(c, f) for k, f in figures.items()} for c in CONTENDERS},
        "partitioned_over_unpartitioned": {k: ratio(f) for k, f in figures.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="old events, removed")
    parser.add_argument("--partition-events", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--prefix", default="bench_partitions", help="of the schemas")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the record here")
    args = parser.parse_args()
    record = Record("partitions", args, postgres=PG)
    print(f"load average at the start: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    rounds: list[dict[str, dict[str, Any]]] = []
    for round_ in range(args.rounds):
        order = CONTENDERS if round_ % 2 == 0 else CONTENDERS[::-1]
        done = {c: one(c, args.events, args.partition_events, args.prefix) for c in order}
        rounds.append(done)
        for contender in CONTENDERS:
            found = done[contender]
            print(
                f"round {round_ + 1}, {contender}: removed {found['removed']:,} in "
                f"{found['remove_seconds']:.2f} s (run {found['run_seconds']:.1f} s); "
                f"{_bytes(found['before']) / 1e6:,.0f} MB before, "
                f"{_bytes(found['after']) / 1e6:,.0f} MB after "
                f"({found['after']['all']['dead_rows']:,} dead rows, "
                f"{found['after'].get('keys', {}).get('dead_rows', 0):,} of them keys'), "
                f"{_bytes(found['after_vacuum']) / 1e6:,.0f} MB after VACUUM "
                f"({found['vacuum_seconds']:.1f} s)"
            )
    results = {
        "events": args.events,
        "partition_events": args.partition_events,
        "rounds": rounds,
        "summary": summary(rounds),
    }
    ratios = results["summary"]["partitioned_over_unpartitioned"]
    print(
        "partitioned / unpartitioned (median of rounds): "
        + ", ".join(f"{k} {v:.2f}x" if v is not None else f"{k} n/a" for k, v in ratios.items())
    )
    print(f"load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        record.write(args.json, results)


if __name__ == "__main__":
    main()
