"""Conditional appends (issue 27): a decision reads a query of two tags, then appends one
event with the condition taken from its read, by 1 and 16 concurrent writers, on tags
of their own (disjoint) or all on one tag (contending); eventcraft on PostgreSQL and
SQLite beside the `eventsourcing` library's DCB recorder (`PostgresDCBRecorderTT`) on
PostgreSQL, in one run; beside them, for the writers on disjoint tags, the raw floor: the
same reads and inserts from raw psycopg with no condition at all, the most any store
making these decisions could reach on the machine.

    python -m benchmarks.dcb [--decisions 1000] [--rounds 2] [--backends postgres,sqlite]

Contenders are measured round by round, interleaved, each on a fresh schema or file.
Printed: decisions/s, p99 latency of one decision (read, decide, append, with its
retries), retries per decision, and the ratios the issue's goals are stated in.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from functools import partial
from pathlib import Path
from urllib.parse import urlsplit

import orjson
import psycopg
from eventcraft.eventstore import (
    AppendCondition,
    AppendConditionFailed,
    EventStore,
    NewEvent,
    Query,
    QueryItem,
)

from .contenders import PG, payload
from .group_commit import Measured, fresh_postgres, percentile, run_threads

DECIDED = "Decided"
FLOOR = "raw floor: read, insert, no condition"
Decide = Callable[[str, str], int]
"""A decision on the two tags given: read, decide, append; returns the retries it took."""


def tags_of(caller: int, n: int, contending: bool) -> tuple[str, str]:
    """The two tags a decision reads and writes: one shared by all when `contending`."""
    if contending:
        return "course:shared", f"student:{caller}-{n}"
    return f"course:{caller}", f"student:{caller}-{n}"


def measure(callers: int, total: int, contending: bool, decide: Decide) -> tuple[Measured, int]:
    retries = [0] * callers

    def work(caller: int, count: int, latencies: list[float]) -> None:
        for n in range(count):
            first, second = tags_of(caller, n, contending)
            began = time.perf_counter()
            retries[caller] += decide(first, second)
            latencies.append(time.perf_counter() - began)

    return run_threads(callers, total, work), sum(retries)


def eventcraft(url: str, callers: int, total: int, contending: bool) -> tuple[Measured, int]:
    if url.startswith("postgresql"):
        url += f"&pool_size={max(callers, 10)}"  # a connection per writer, as the library's
    with EventStore.open(url) as store:

        def decide(first: str, second: str) -> int:
            query = Query(
                [
                    QueryItem(types=[DECIDED], tags=[first]),
                    QueryItem(types=[DECIDED], tags=[second]),
                ]
            )
            for tries in range(1000):
                read = store.read_query(query)
                event = NewEvent(DECIDED, payload(len(read.events)), tags=[first, second])
                try:
                    store.append(
                        f"decision-{uuid.uuid4().hex}",
                        [event],
                        condition=AppendCondition(query, after=read.head),
                    )
                    return tries
                except AppendConditionFailed:
                    continue
            raise RuntimeError("a decision was refused 1000 times")

        return measure(callers, total, contending, decide)


def library(table: str, callers: int, total: int, contending: bool) -> tuple[Measured, int]:
    from eventsourcing.dcb.api import DCBAppendCondition, DCBEvent, DCBQuery, DCBQueryItem
    from eventsourcing.dcb.postgres_tt import PostgresDCBRecorderTT
    from eventsourcing.persistence import IntegrityError
    from eventsourcing.postgres import PostgresDatastore

    parts = urlsplit(PG)
    datastore = PostgresDatastore(
        parts.path.lstrip("/"),
        parts.hostname or "127.0.0.1",
        parts.port or 5432,
        parts.username or "postgres",
        parts.password or "",
        pool_size=callers,
    )
    # In the public schema, under a table name of its own: the recorder's functions
    # name its tables without their schema.
    recorder = PostgresDCBRecorderTT(datastore, events_table_name=table)
    recorder.create_table()

    def decide(first: str, second: str) -> int:
        query = DCBQuery(
            [
                DCBQueryItem(types=[DECIDED], tags=[first]),
                DCBQueryItem(types=[DECIDED], tags=[second]),
            ]
        )
        for tries in range(1000):
            read = recorder.read(query)
            events = list(read)
            event = DCBEvent(DECIDED, orjson.dumps(payload(len(events))), tags=[first, second])
            try:
                recorder.append([event], DCBAppendCondition(query, after=read.head))
                return tries
            except IntegrityError:
                continue
        raise RuntimeError("a decision was refused 1000 times")

    try:
        return measure(callers, total, contending, decide)
    finally:
        datastore.close()
        with psycopg.connect(PG, autocommit=True) as conn:
            for suffix in ("_tt_main", "_tt_tag"):
                conn.execute(f"DROP TABLE IF EXISTS {table}{suffix} CASCADE")


RAW_TABLES = """
CREATE TABLE {t}_events (position bigserial PRIMARY KEY, type text NOT NULL,
    data bytea NOT NULL, tags text[] NOT NULL);
CREATE TABLE {t}_tags (tag text NOT NULL, position bigint NOT NULL, PRIMARY KEY (tag, position))
"""
RAW_READ = """SELECT e.position, e.type, e.data FROM {t}_tags g JOIN {t}_events e USING (position)
WHERE g.tag = ANY(%s) ORDER BY e.position"""
RAW_WRITE = """WITH e AS (INSERT INTO {t}_events (type, data, tags) VALUES (%s, %s, %s)
RETURNING position, tags) INSERT INTO {t}_tags SELECT unnest(e.tags), e.position FROM e"""


def raw_floor(table: str, callers: int, total: int, contending: bool) -> tuple[Measured, int]:
    """The work of a decision and nothing more: one read of the two tags' events (their
    bytes, undecoded, as the library returns them) and one insert of the event and its two
    tag rows, from a connection per writer, with no condition, lock or check: unsafe, and
    a floor that no store deciding by these reads can go under on this machine."""
    connections = [psycopg.connect(PG, autocommit=True) for _ in range(callers)]
    connections[0].execute(RAW_TABLES.format(t=table))
    read, write = RAW_READ.format(t=table), RAW_WRITE.format(t=table)
    free, mine = list(connections), threading.local()

    def decide(first: str, second: str) -> int:
        conn = getattr(mine, "conn", None)
        if conn is None:
            conn = mine.conn = free.pop()  # a connection of its own for each writer thread
        count = len(conn.execute(read, ([first, second],)).fetchall())
        conn.execute(write, (DECIDED, orjson.dumps(payload(count)), [first, second]))
        return 0

    try:
        return measure(callers, total, contending, decide)
    finally:
        for suffix in ("_events", "_tags"):
            connections[0].execute(f"DROP TABLE IF EXISTS {table}{suffix}")
        for conn in connections:
            conn.close()


SCENARIOS = [(1, False, "1 writer"), (16, False, "16 writers, disjoint tags"),
             (16, True, "16 writers, one tag")]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--decisions", type=int, default=1000, help="decisions per measurement")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--backends", default="postgres,sqlite")
    args = parser.parse_args()
    backends = args.backends.split(",")
    folder = Path(tempfile.mkdtemp(prefix="eventcraft-dcb-"))
    results: dict[tuple[str, str], list[tuple[Measured, int]]] = defaultdict(list)
    for round_ in range(args.rounds):
        for callers, contending, label in SCENARIOS:
            shape = (callers, args.decisions, contending)
            runs: list[tuple[str, Callable[[], tuple[Measured, int]]]] = []
            if "postgres" in backends:
                url = fresh_postgres(f"bench_dcb_{round_}")
                table = f"bench_dcb_{uuid.uuid4().hex[:8]}"
                runs.append(("eventcraft, PostgreSQL", partial(eventcraft, url, *shape)))
                runs.append(
                    ("eventsourcing PostgresDCBRecorderTT", partial(library, table, *shape))
                )
                if not contending:  # without a condition, contention is not a race
                    runs.append((FLOOR, partial(raw_floor, f"{table}_raw", *shape)))
            if "sqlite" in backends:
                path = f"sqlite:///{folder / uuid.uuid4().hex}.db"
                runs.append(("eventcraft, SQLite", partial(eventcraft, path, *shape)))
            for name, run in runs if round_ % 2 == 0 else runs[::-1]:
                results[(label, name)].append(run())
    _report(results)


def _report(results: dict[tuple[str, str], list[tuple[Measured, int]]]) -> None:
    rates: dict[tuple[str, str], float] = {}
    print(f"{'scenario':28} {'contender':38} {'decisions/s':>12} {'p99 ms':>8} {'retries':>8}")
    for (label, name), runs in results.items():
        rate = statistics.median(m.rate for m, _ in runs)
        p99 = statistics.median(percentile(m.calls, 0.99) for m, _ in runs) * 1000
        retries = statistics.median(r / m.events for m, r in runs)
        rates[(label, name)] = rate
        print(f"{label:28} {name:38} {rate:12,.0f} {p99:8.1f} {retries:8.2f}")
    ours, theirs = "eventcraft, PostgreSQL", "eventsourcing PostgresDCBRecorderTT"
    one, disjoint, shared = (label for _, _, label in SCENARIOS)
    if (one, ours) in rates and (one, theirs) in rates:
        print()
        ratios = [
            ("1 writer: eventcraft / eventsourcing", (one, ours), (one, theirs), ">= 1"),
            (
                "16 disjoint: eventcraft / eventsourcing",
                (disjoint, ours),
                (disjoint, theirs),
                ">= 3",
            ),
            ("16 disjoint / 1 writer, eventcraft", (disjoint, ours), (one, ours), ">= 3"),
            ("16 on one tag: eventcraft / eventsourcing", (shared, ours), (shared, theirs), ""),
        ]
        if (disjoint, FLOOR) in rates:
            ratios.append(("16 disjoint: raw floor / eventsourcing", (disjoint, FLOOR),
                           (disjoint, theirs), "the most any store can reach"))  # fmt: skip
        for text, top, bottom, goal in ratios:
            print(f"{text:44} {rates[top] / rates[bottom]:6.2f}x  {'goal ' + goal if goal else ''}")


if __name__ == "__main__":
    main()
