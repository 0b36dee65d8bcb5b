"""Speed against floors this machine can judge (issue 56): `python -m benchmarks.floors`.

Every measure holds eventcraft against a floor measured in the same run, on the same
machine, interleaved round by round (the order of the two turned each round), so that a
round slowed by another tenant of the machine slows both sides of its ratio:

- PostgreSQL single appends, one event a transaction, beside raw psycopg inserting the
  same row a transaction at a time (`contenders.Raw`); and 4 writer processes of each;
- DCB conditional appends (`dcb.py`): 16 writers on tags of their own, and one writer,
  beside the raw floor (the decision's read and insert from raw psycopg, with no
  condition or lock); 16 writers on one tag beside the `eventsourcing` library;
- group commit (`group_commit.py`): 16 callers, threads and asyncio tasks, beside raw
  one-insert transactions from 16 connections, on the shared server (on disk) and on a
  server of the benchmark's own with the disk taken out (`fsync`, `synchronous_commit`
  and `full_page_writes` off, its data on tmpfs when there is one);
- SQLite: 4 threads appending 50-event batches beside "raw, our rows" (the store's own
  statements from raw sqlite3 on rows made beforehand); the write-ahead log's bytes of a
  100-event append beside a plain table's (`scale_contenders.PlainSQLite`); a global page
  of 1,000 events beside the plain table's rows made into the same types (UUIDs,
  datetimes, decoded JSON).

Printed: one table, each measure's eventcraft and floor figures (medians of the rounds),
the ratio of each round, their median and spread, the goal and whether the median meets
it; the machine's load average at the start and the end. `--json PATH` writes the record
(`benchmarks/record.py`) that `benchmarks/charts.py` draws `floors.png` from.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any
from uuid import UUID

import orjson
import psycopg

from . import contenders, group_commit
from .contenders import CONTENDERS, Ours, Raw, concurrent_writer, reset_schema
from .dcb import eventcraft as dcb_eventcraft
from .dcb import library as dcb_library
from .dcb import raw_floor as dcb_raw_floor
from .eventstore import SPAWN, append_singles
from .group_commit import (
    Measured,
    floor_batches,
    fresh_postgres,
    fresh_sqlite,
    raw_postgres,
    store_appends,
    store_batches,
    task_appends,
)
from .record import Record
from .scale_contenders import PAGE, STREAM_LENGTH, PlainSQLite, batch, stream_name
from .scale_contenders import Ours as OursSide

ROOT = Path(__file__).resolve().parent.parent
CALLERS = 16
"""Concurrent callers of group commit, and writers of the DCB measures."""
SLICES = 20
"""Turns the two sides of the single appends take in each round."""


NO_DISK = ("synchronous_commit=off", "full_page_writes=off", "max_connections=100")
"""The own server's settings beside `fsync=off`, which every server of the tests has."""


@dataclass(frozen=True)
class Measure:
    """One ratio the issue states a goal for."""

    name: str
    """As the table prints it."""
    floor: str
    """What the floor is."""
    unit: str
    """Of both figures: `events/s` and `decisions/s` (higher is better), `ms/page` and
    `WAL bytes/append` (lower is better)."""
    goal: float
    """The ratio, eventcraft's figure over the floor's, the issue asks for."""
    higher_is_better: bool = True

    def met(self, ratio: float) -> bool:
        return ratio >= self.goal if self.higher_is_better else ratio <= self.goal

    @property
    def goal_text(self) -> str:
        return f"{'>=' if self.higher_is_better else '<='} {self.goal:g}"


RAW_ONE = "raw psycopg, one insert a transaction"
RAW_16 = "raw psycopg, one insert a transaction, 16 connections"
DCB_FLOOR = "raw psycopg: the decision's read and insert, no condition or lock"
MEASURES = [
    Measure("PostgreSQL: single appends", RAW_ONE, "events/s", 0.85),
    Measure("PostgreSQL: 4 writer processes", f"{RAW_ONE}, 4 processes", "events/s", 0.75),
    Measure("DCB: 16 writers, disjoint tags", DCB_FLOOR, "decisions/s", 0.6),
    Measure("DCB: 1 writer", DCB_FLOOR, "decisions/s", 0.7),
    Measure("DCB: 16 writers, one tag", "eventsourcing PostgresDCBRecorderTT", "decisions/s", 1.0),
    Measure("group commit: 16 threads, disk", RAW_16, "events/s", 1.5),
    Measure("group commit: 16 tasks, disk", RAW_16, "events/s", 1.5),
    Measure("group commit: 16 threads, no disk", f"{RAW_16}, no disk", "events/s", 0.9),
    Measure("group commit: 16 tasks, no disk", f"{RAW_16}, no disk", "events/s", 0.9),
    Measure(
        "SQLite: 4 threads, 50-event batches",
        "raw, our rows: the store's statements from sqlite3",
        "events/s",
        0.85,
    ),
    Measure(
        "SQLite: WAL bytes of a 100-event append",
        "a plain table",
        "WAL bytes/append",
        2.0,
        higher_is_better=False,
    ),
    Measure(
        "SQLite: global page of 1,000 events",
        "a plain table's rows as UUIDs, datetimes, decoded JSON",
        "ms/page",
        1.2,
        higher_is_better=False,
    ),
]
BY_NAME = {measure.name: measure for measure in MEASURES}


@dataclass(frozen=True)
class Pair:
    """One round of a measure: eventcraft's figure and the floor's, in its unit."""

    eventcraft: float
    floor: float

    @property
    def ratio(self) -> float:
        return self.eventcraft / self.floor


@dataclass(frozen=True)
class Sizes:
    """What each round asks of each side (the help of each, `--help`)."""

    single: int = field(metadata={"help": "one-event appends (PostgreSQL)"})
    writers: int = field(metadata={"help": "writer processes"})
    concurrent: int = field(metadata={"help": "one-event appends per writer process"})
    decisions: int = field(metadata={"help": "decisions by 16 writers on disjoint tags"})
    lone_decisions: int = field(metadata={"help": "decisions by one writer"})
    contended: int = field(
        metadata={"help": "decisions by 16 writers on one tag (each retried until it goes in)"}
    )
    appends: int = field(
        metadata={"help": "single-event appends by the 16 callers of group commit, together"}
    )
    batches: int = field(metadata={"help": "50-event batches by 4 threads (SQLite)"})
    sqlite_events: int = field(
        metadata={
            "help": "events in each SQLite log before the WAL and page measures (100-event streams)"
        }
    )
    pages: int = field(metadata={"help": "global pages read from each SQLite log"})
    wal_appends: int = field(
        metadata={"help": "100-event appends whose WAL bytes are counted, on each side"}
    )


FULL = Sizes(5000, 4, 1000, 3000, 1000, 400, 16000, 2000, 200_000, 200, 50)
"""Six to ten minutes on this 2-core machine while others load it (load average 6 to 8)."""
QUICK = Sizes(300, 4, 100, 300, 100, 48, 1500, 100, 10_000, 20, 10)
"""`--quick`: under a minute."""


@dataclass
class Results:
    """Every round's pairs, by measure; the load average at each round's start."""

    pairs: dict[str, list[Pair]] = field(default_factory=lambda: {m.name: [] for m in MEASURES})
    load: list[list[float]] = field(default_factory=list)

    def add(self, found: dict[str, Pair]) -> None:
        for name, pair in found.items():
            self.pairs[name].append(pair)


def _turned(runs: Sequence[tuple[str, Callable[[], Any]]], round_: int) -> dict[str, Any]:
    """Each run's result, in the given order on even rounds and reversed on odd ones."""
    order = runs if round_ % 2 == 0 else runs[::-1]
    return {name: run() for name, run in order}


# PostgreSQL single appends, one process and four.


class SingleAppends:
    """`contenders.Ours` and `contenders.Raw`, each in a schema of the run's own."""

    def __init__(self, prefix: str) -> None:
        self.sides: dict[str, Any] = {"eventcraft": Ours(), "floor": Raw()}
        for key, side in self.sides.items():
            side.schema = f"{prefix}_{key}"
            reset_schema(side.schema)
            side.open()  # the tables, before writer processes race to make them
        self.streams = {key: side.new_streams(20) for key, side in self.sides.items()}

    def singles(self, round_: int, count: int) -> dict[str, Pair]:
        """The two sides' appends in `SLICES` slices taken turn about: a burst of other
        work on the shared server (which moved a side's rate 4-fold between rounds of
        seconds each) falls on both sides alike."""
        seconds = dict.fromkeys(self.sides, 0.0)
        shares = [count // SLICES + (n < count % SLICES) for n in range(SLICES)]
        for n, share in enumerate(shares):
            keys = list(self.sides)
            for key in keys if (round_ + n) % 2 == 0 else keys[::-1]:
                began = time.perf_counter()
                append_singles(self.sides[key], self.streams[key], share)
                seconds[key] += time.perf_counter() - began
        rates = {key: count / spent for key, spent in seconds.items()}
        return {MEASURES[0].name: Pair(rates["eventcraft"], rates["floor"])}

    def writers(
        self, round_: int, pool: ProcessPoolExecutor, manager: Any, sizes: Sizes
    ) -> dict[str, Pair]:
        def run(key: str) -> float:
            side = self.sides[key]
            barrier = manager.Barrier(sizes.writers, timeout=120)
            futures = [
                pool.submit(_writer, side.name, side.schema, sizes.concurrent, barrier)
                for _ in range(sizes.writers)
            ]
            spans = [future.result() for future in futures]
            seconds = max(end for _, end in spans) - min(start for start, _ in spans)
            return sizes.writers * sizes.concurrent / seconds

        rates = _turned([(key, partial(run, key)) for key in self.sides], round_)
        return {MEASURES[1].name: Pair(rates["eventcraft"], rates["floor"])}

    def close(self) -> None:
        for side in self.sides.values():
            side.close()
            _drop_schema(contenders.PG, side.schema)


def _writer(name: str, schema: str, appends: int, barrier: Any) -> tuple[float, float]:
    """In a writer process: `contenders.concurrent_writer` in the run's own schema."""
    CONTENDERS[name].schema = schema  # this process's class: the writer makes its own
    return concurrent_writer(name, appends, barrier)


# DCB conditional appends.


def decisions(round_: int, prefix: str, sizes: Sizes) -> dict[str, Pair]:
    """Each DCB measure's eventcraft and floor, on fresh schemas and tables."""
    table = f"{prefix}_dcb_{uuid.uuid4().hex[:8]}"

    def ours(callers: int, total: int, contending: bool) -> float:
        url = fresh_postgres(f"{prefix}_dcb")
        return dcb_eventcraft(url, callers, total, contending)[0].rate

    shapes = [
        (MEASURES[2].name, CALLERS, sizes.decisions, False, dcb_raw_floor),
        (MEASURES[3].name, 1, sizes.lone_decisions, False, dcb_raw_floor),
        (MEASURES[4].name, CALLERS, sizes.contended, True, dcb_library),
    ]
    found = {}
    for name, callers, total, contending, floor in shapes:
        rates = _turned(
            [
                ("eventcraft", partial(ours, callers, total, contending)),
                ("floor", partial(_rate, floor, table, callers, total, contending)),
            ],
            round_,
        )
        found[name] = Pair(rates["eventcraft"], rates["floor"])
    return found


def _rate(
    measure: Callable[[str, int, int, bool], tuple[Measured, int]],
    table: str,
    callers: int,
    total: int,
    contending: bool,
) -> float:
    return measure(table, callers, total, contending)[0].rate


# Group commit: 16 callers, on the disk and without it.


def grouped(
    round_: int, prefix: str, appends: int, disk: bool, server: str = ""
) -> dict[str, Pair]:
    """Threads and tasks appending through grouped stores beside raw inserts from as many
    connections, on the shared server, or on `server` (the one without a disk)."""
    with on_server(server or contenders.PG):
        return _grouped(round_, prefix, appends, disk)


def _grouped(round_: int, prefix: str, appends: int, disk: bool) -> dict[str, Pair]:
    rates = _turned(
        [
            (
                "threads",
                lambda: store_appends(fresh_postgres(f"{prefix}_gc"), True, CALLERS, appends).rate,
            ),
            (
                "tasks",
                lambda: task_appends(fresh_postgres(f"{prefix}_gc"), True, CALLERS, appends).rate,
            ),
            ("floor", lambda: _raw_inserts(f"{prefix}_gc_raw", CALLERS, appends).rate),
        ],
        round_,
    )
    threads, tasks = MEASURES[5:7] if disk else MEASURES[7:9]
    return {
        threads.name: Pair(rates["threads"], rates["floor"]),
        tasks.name: Pair(rates["tasks"], rates["floor"]),
    }


def _raw_inserts(schema: str, callers: int, appends: int) -> Measured:
    reset_schema(schema)
    return raw_postgres(schema, callers, appends)


@contextmanager
def own_server() -> Iterator[str]:
    """A PostgreSQL server of the run's own with the disk taken out (`NO_DISK`, data on
    tmpfs when the machine has one), as the tests make theirs; its URL."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))  # the tests' server of one's own, which this borrows
    # Here, not at the top: the writer processes import this module, and need no server.
    from tests.postgres_server import PostgresServer

    shm = Path("/dev/shm")
    folder = Path(tempfile.mkdtemp(prefix="eventcraft-floors-", dir=shm if shm.is_dir() else None))
    server = PostgresServer(folder, NO_DISK)
    server.start()
    try:
        yield server.url
    finally:
        if server.running():
            server.stop("immediate")
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def on_server(url: str) -> Iterator[None]:
    """The reused modules pointed at the server `url` meanwhile: they read theirs from
    `EVENTCRAFT_BENCH_PG` once, when imported, into their `PG`."""
    modules = [vars(contenders), vars(group_commit)]  # group_commit imported PG, as its own
    saved = [module["PG"] for module in modules]
    for module in modules:
        module["PG"] = url
    try:
        yield
    finally:
        for module, before in zip(modules, saved, strict=True):
            module["PG"] = before


# SQLite: batches, WAL bytes, global pages.


class TypedPlainSQLite(PlainSQLite):
    """`scale_contenders.PlainSQLite` with a time for each row, whose global page makes
    its rows into what an event holds: a `UUID`, a `datetime` and the decoded JSON."""

    def __init__(self, path: Path) -> None:
        with _sqlite(path) as conn:
            conn.execute(
                "CREATE TABLE plain_events (position INTEGER PRIMARY KEY, "
                "id BLOB NOT NULL UNIQUE, stream_id TEXT NOT NULL, version INTEGER NOT NULL, "
                "type TEXT NOT NULL, data TEXT NOT NULL, recorded_at TEXT NOT NULL "
                # The store's form of a time: ISO 8601, microseconds, UTC.
                "DEFAULT (strftime('%Y-%m-%dT%H:%M:%f000+00:00', 'now')), "
                "UNIQUE (stream_id, version))"
            )
        super().__init__(path)  # its table is there already: its statements fit it

    def global_page(self, after: int, limit: int = PAGE) -> int:
        rows = self.conn.execute(
            "SELECT position, id, stream_id, version, type, data, recorded_at "
            "FROM plain_events WHERE position > ? ORDER BY position LIMIT ?",
            (after, limit),
        ).fetchall()
        loads, moment = orjson.loads, datetime.fromisoformat
        events = [
            (position, UUID(bytes=id_), stream, version, type_, loads(data), moment(at))
            for position, id_, stream, version, type_, data, at in rows
        ]
        return len(events)


@contextmanager
def _sqlite(path: Path) -> Iterator[Any]:
    import sqlite3

    conn = sqlite3.connect(path, isolation_level=None)
    try:
        yield conn
    finally:
        conn.close()


class SQLiteLogs:
    """Our store and the typed plain table on SQLite, grown to the same events."""

    def __init__(self, folder: Path, events: int) -> None:
        self.paths = {"eventcraft": folder / "floors_ours.db", "floor": folder / "floors_plain.db"}
        for path in self.paths.values():
            _remove_sqlite(path)  # a run before's, in a `--folder` given again
        self.sides: dict[str, Any] = {
            "eventcraft": OursSide(f"sqlite:///{self.paths['eventcraft']}"),
            "floor": TypedPlainSQLite(self.paths["floor"]),
        }
        self.events = batch(STREAM_LENGTH)
        self.streams = max(1, events // STREAM_LENGTH)
        for side in self.sides.values():
            for n in range(self.streams):
                side.append_stream(stream_name(n), self.events)

    def wal(self, round_: int, appends: int) -> dict[str, Pair]:
        """The median bytes a 100-event append adds to each side's emptied WAL."""
        names = [stream_name(self.streams + n) for n in range(appends)]
        self.streams += appends

        def run(key: str) -> float:
            return statistics.median(self._wal_bytes(key, name) for name in names)

        found = _turned([(key, partial(run, key)) for key in self.sides], round_)
        return {MEASURES[10].name: Pair(found["eventcraft"], found["floor"])}

    def _wal_bytes(self, key: str, stream: str) -> int:
        path = self.paths[key]
        with _sqlite(path) as conn:
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy:
            raise RuntimeError(f"{path}: the WAL could not be emptied (a reader held it)")
        self.sides[key].append_stream(stream, self.events)
        return path.with_name(path.name + "-wal").stat().st_size

    def pages(self, round_: int, count: int, rng: Any) -> dict[str, Pair]:
        """The median ms of a global page at the same random positions on each side."""
        events = self.streams * STREAM_LENGTH
        afters = [rng.randrange(max(1, events - PAGE)) for _ in range(count)]

        def run(key: str) -> float:
            times = []
            for after in afters:
                began = time.perf_counter()
                self.sides[key].global_page(after)
                times.append(time.perf_counter() - began)
            return 1000 * statistics.median(times)

        found = _turned([(key, partial(run, key)) for key in self.sides], round_)
        return {MEASURES[11].name: Pair(found["eventcraft"], found["floor"])}

    def close(self) -> None:
        for side in self.sides.values():
            side.close()
        for path in self.paths.values():
            _remove_sqlite(path)


def sqlite_batches(round_: int, folder: Path, batches: int) -> dict[str, Pair]:
    """4 threads' 50-event batches through the store and "raw, our rows", each on a new
    file, removed after."""
    paths = {"eventcraft": fresh_sqlite(folder), "floor": fresh_sqlite(folder)}
    try:
        rates = _turned(
            [
                (
                    "eventcraft",
                    lambda: (
                        store_batches(f"sqlite:///{paths['eventcraft']}", True, 4, batches, 50).rate
                    ),
                ),
                ("floor", lambda: floor_batches(paths["floor"], 4, batches, 50).rate),
            ],
            round_,
        )
    finally:
        for path in paths.values():
            _remove_sqlite(Path(path))
    return {MEASURES[9].name: Pair(rates["eventcraft"], rates["floor"])}


def _remove_sqlite(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)


# The run.


def run(rounds: int, sizes: Sizes, prefix: str, folder: Path) -> Results:
    """Every measure, interleaved over `rounds`; the pairs of each round."""
    rng = random.Random(56)
    results = Results()
    singles = SingleAppends(prefix)
    print(f"SQLite: filling two logs of {sizes.sqlite_events:,} events", flush=True)
    logs = SQLiteLogs(folder, sizes.sqlite_events)
    print("starting a PostgreSQL server of our own, with the disk taken out", flush=True)
    try:
        with (
            own_server() as no_disk,
            SPAWN.Manager() as manager,
            ProcessPoolExecutor(sizes.writers, mp_context=SPAWN) as pool,
        ):
            for round_ in range(rounds):
                results.load.append(list(os.getloadavg()))
                print(f"round {round_ + 1} of {rounds}, load {_load()}", flush=True)
                parts: list[Callable[[], dict[str, Pair]]] = [
                    partial(singles.singles, round_, sizes.single),
                    partial(singles.writers, round_, pool, manager, sizes),
                    partial(decisions, round_, prefix, sizes),
                    partial(grouped, round_, prefix, sizes.appends, disk=True),
                    partial(grouped, round_, prefix, sizes.appends, disk=False, server=no_disk),
                    partial(sqlite_batches, round_, folder, sizes.batches),
                    partial(logs.wal, round_, sizes.wal_appends),
                    partial(logs.pages, round_, sizes.pages, rng),
                ]
                for part in parts:
                    began = time.perf_counter()
                    found = part()
                    results.add(found)
                    _print_part(found, time.perf_counter() - began)
    finally:
        singles.close()
        logs.close()
        for suffix in ("dcb", "gc", "gc_raw"):
            _drop_schema(contenders.PG, f"{prefix}_{suffix}")
    return results


def _drop_schema(server: str, schema: str) -> None:
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE".encode())


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def _print_part(found: dict[str, Pair], seconds: float) -> None:
    """A part's figures as it ends: eventcraft's, the floor's, the ratio; its seconds."""
    for n, (name, pair) in enumerate(found.items()):
        took = f"({seconds:.1f} s)" if n == 0 else ""
        print(
            f"  {name:42} {pair.eventcraft:>12,.1f} {pair.floor:>12,.1f} {pair.ratio:6.2f} {took}",
            flush=True,
        )


def summary(results: Results) -> list[dict[str, Any]]:
    """Each measure with its floor, figures, rounds, median ratio, spread and verdict."""
    found = []
    for measure in MEASURES:
        pairs = results.pairs[measure.name]
        ratios = [pair.ratio for pair in pairs]
        ratio = statistics.median(ratios)
        found.append(
            {
                "measure": measure.name,
                "floor_is": measure.floor,
                "unit": measure.unit,
                "eventcraft": statistics.median(pair.eventcraft for pair in pairs),
                "floor": statistics.median(pair.floor for pair in pairs),
                "rounds": [{**asdict(pair), "ratio": pair.ratio} for pair in pairs],
                "ratio": ratio,
                "spread": {"min": min(ratios), "max": max(ratios)},
                "goal": measure.goal,
                "better": "higher" if measure.higher_is_better else "lower",
                "met": measure.met(ratio),
            }
        )
    return found


def print_table(found: list[dict[str, Any]], load_start: str) -> None:
    print(f"\nload average (1, 5, 15 min): {load_start} at the start, {_load()} at the end\n")
    print("| measure | eventcraft | floor | ratio by round | median | spread | goal | |")
    print("|---|---|---|---|---|---|---|---|")
    for row in found:
        unit = row["unit"]
        rounds = " ".join(f"{r['ratio']:.2f}" for r in row["rounds"])
        low, high = row["spread"]["min"], row["spread"]["max"]
        measure = BY_NAME[row["measure"]]
        print(
            f"| {row['measure']} | {_figure(row['eventcraft'], unit)} | "
            f"{_figure(row['floor'], unit)} | {rounds} | {row['ratio']:.2f} | "
            f"{low:.2f}-{high:.2f} | {measure.goal_text} | {'met' if row['met'] else 'missed'} |"
        )
    print("\nfloors:")
    for measure in MEASURES:
        print(f"  {measure.name}: {measure.floor}")


def _figure(value: float, unit: str) -> str:
    return f"{value:,.2f} {unit}" if value < 100 else f"{value:,.0f} {unit}"


def _arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved (default 3)")
    parser.add_argument("--quick", action="store_true", help="small sizes: under a minute")
    for size in fields(Sizes):
        name = size.name
        help_text = (
            f"{size.metadata['help']} (default {getattr(FULL, name)}, "
            f"{getattr(QUICK, name)} with --quick)"
        )
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, help=help_text, dest=name)
    parser.add_argument("--prefix", default="bench_floors", help="of the PostgreSQL schemas")
    parser.add_argument("--folder", type=Path, help="for the SQLite files (default: a temp dir)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the record here")
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    parser = _arguments()
    args = parser.parse_args(argv)
    base = QUICK if args.quick else FULL
    chosen = {
        name: getattr(args, name) if getattr(args, name) is not None else getattr(base, name)
        for name in (size.name for size in fields(Sizes))
    }
    bad = [name for name, value in chosen.items() if value < 1]
    if args.rounds < 1 or bad:
        parser.error(f"--rounds and the sizes must be 1 or more ({', '.join(bad) or 'rounds'})")
    sizes = Sizes(**chosen)
    for name, value in chosen.items():
        setattr(args, name, value)  # the record names the sizes run, not None
    record = Record("floors", args, postgres=contenders.PG)
    load_start = _load()
    print(f"load average (1, 5, 15 min) at the start: {load_start}", flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.folder or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        results = run(args.rounds, sizes, args.prefix, folder)
    found = summary(results)
    print_table(found, load_start)
    if args.json:
        record.write(
            args.json,
            {"measures": found, "sizes": asdict(sizes), "round_load_average": results.load},
        )


if __name__ == "__main__":
    main()
