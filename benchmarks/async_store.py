"""The async store beside the sync one: `python -m benchmarks.async_store`.

On PostgreSQL (`EVENTCRAFT_BENCH_PG`), interleaved round by round in one run:

- concurrent appends: `--tasks` tasks (100) each appending single events to a
  stream of its own through one `AsyncEventStore`, against the same number of
  appends from 4 and from 16 threads sharing one `EventStore`, and against raw
  psycopg async (`INSERT` through psycopg's async pool, the same pool size);
- a lone caller: one task appending one event at a time, each append paired
  with one on the sync store right after it: the per-call latency the async
  face adds;
- loads of a `--size` (1,000) event aggregate through `AsyncRepository` and
  `Repository`, in turn.

Prints events/s and per-call p50/p99 for each, and the ratios the issue sets
as goals: async throughput over 16 threads' (at least 1), the lone caller's
p50 async over sync (at most 1.10).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
import psycopg
import psycopg_pool
from eventcraft.domain import AsyncRepository, Repository
from eventcraft.eventstore import AsyncEventStore, EventStore, NewEvent
from eventcraft.eventstore.postgres.connections import POOL_SIZE

from examples.bank import BankAccount

from .contenders import PG, payload, reset_schema

SCHEMA = "bench_async"
RAW_SCHEMA = "bench_async_raw"


class Results:
    """Per scenario and contender: events, seconds and call latencies, by round."""

    def __init__(self) -> None:
        self.rates: dict[tuple[str, str], list[float]] = defaultdict(list)
        self.latencies: dict[tuple[str, str], list[float]] = defaultdict(list)

    def add(
        self, scenario: str, name: str, events: int, seconds: float, calls: list[float]
    ) -> None:
        self.rates[scenario, name].append(events / seconds)
        self.latencies[scenario, name] += calls

    def line(self, scenario: str, name: str) -> str:
        rate = statistics.median(self.rates[scenario, name])
        p50, p99 = percentiles(self.latencies[scenario, name])
        return (
            f"  {name:<32} {rate:>9,.0f} events/s   "
            f"p50 {p50 * 1e3:6.2f} ms   p99 {p99 * 1e3:6.2f} ms"
        )

    def ratio(self, scenario: str, name: str, reference: str) -> float:
        ours, theirs = self.rates[scenario, name], self.rates[scenario, reference]
        return statistics.median(a / b for a, b in zip(ours, theirs, strict=True))


def percentiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return ordered[len(ordered) // 2], ordered[min(len(ordered) - 1, len(ordered) * 99 // 100)]


def event(n: int) -> list[NewEvent]:
    return [NewEvent("Deposited", payload(n))]


async def async_appends(store: AsyncEventStore, tasks: int, each: int) -> tuple[float, list[float]]:
    calls: list[float] = []

    async def writer() -> None:
        stream = f"account-{uuid.uuid4().hex}"
        for n in range(each):
            started = time.perf_counter()
            await store.append(stream, event(n), expected_version=n)
            calls.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(writer() for _ in range(tasks)))
    return time.perf_counter() - started, calls


def threaded_appends(store: EventStore, threads: int, total: int) -> tuple[float, list[float]]:
    calls: list[float] = []
    lock = threading.Lock()

    def writer(count: int) -> None:
        stream = f"account-{uuid.uuid4().hex}"
        mine = []
        for n in range(count):
            started = time.perf_counter()
            store.append(stream, event(n), expected_version=n)
            mine.append(time.perf_counter() - started)
        with lock:
            calls.extend(mine)

    shares = [total // threads + (1 if t < total % threads else 0) for t in range(threads)]
    with ThreadPoolExecutor(threads) as pool:
        started = time.perf_counter()
        list(pool.map(writer, shares))
        return time.perf_counter() - started, calls


async def raw_appends(
    pool: psycopg_pool.AsyncConnectionPool[Any], tasks: int, each: int
) -> tuple[float, list[float]]:
    insert = (
        "INSERT INTO raw_events (stream_id, version, id, type, data, metadata) "
        "VALUES (%s, %s, %s, %s, %s::jsonb, '{}'::jsonb)"
    )
    calls: list[float] = []

    async def writer() -> None:
        stream = f"account-{uuid.uuid4().hex}"
        for n in range(each):
            started = time.perf_counter()
            async with pool.connection() as conn:
                data = orjson.dumps(payload(n)).decode()
                params = (stream, n + 1, uuid.uuid4(), "Deposited", data)
                await conn.execute(insert, params)
            calls.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(writer() for _ in range(tasks)))
    return time.perf_counter() - started, calls


async def lone_callers(
    store: AsyncEventStore, sync_store: EventStore, count: int
) -> tuple[list[float], list[float]]:
    """One append through each store in turn, `count` times: pairs timed a moment apart,
    so that the load of this shared machine falls on both alike."""
    ours, theirs = [], []
    stream, sync_stream = f"account-{uuid.uuid4().hex}", f"account-{uuid.uuid4().hex}"
    for n in range(count):
        started = time.perf_counter()
        await store.append(stream, event(n), expected_version=n)
        ours.append(time.perf_counter() - started)
        started = time.perf_counter()
        sync_store.append(sync_stream, event(n), expected_version=n)  # blocks the loop: alone
        theirs.append(time.perf_counter() - started)
    return ours, theirs


async def paired_loads(
    load: Callable[[], Awaitable[object]], sync_load: Callable[[], object], times: int
) -> tuple[list[float], list[float]]:
    """`load` and `sync_load` in turn, `times` times each, timed a moment apart."""
    ours, theirs = [], []
    for _ in range(times):
        started = time.perf_counter()
        await load()
        ours.append(time.perf_counter() - started)
        started = time.perf_counter()
        sync_load()  # blocks the loop: alone
        theirs.append(time.perf_counter() - started)
    return ours, theirs


def build_account(store: EventStore, size: int) -> str:
    account_id = uuid.uuid4().hex
    account = BankAccount(account_id)
    account.open("bench")
    for n in range(size - 1):
        account.deposit(n + 1)
    Repository(store, BankAccount, snapshot_every=None).save(account)
    return account_id


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--each", type=int, default=10, help="appends per task a round")
    parser.add_argument("--lone", type=int, default=300, help="appends of the lone caller a round")
    parser.add_argument("--size", type=int, default=1000, help="events of the aggregate loaded")
    parser.add_argument("--loads", type=int, default=20, help="loads a round")
    args = parser.parse_args()
    asyncio.run(run(args))


async def run(args: argparse.Namespace) -> None:
    reset_schema(SCHEMA)
    reset_schema(RAW_SCHEMA)
    url = f"{PG}?schema={SCHEMA}"
    results = Results()
    total = args.tasks * args.each
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(
            f"CREATE TABLE {RAW_SCHEMA}.raw_events (position bigserial PRIMARY KEY, "
            "stream_id text NOT NULL, version bigint NOT NULL, id uuid UNIQUE NOT NULL, "
            "type text NOT NULL, data jsonb NOT NULL, metadata jsonb NOT NULL, "
            "recorded_at timestamptz NOT NULL DEFAULT now(), UNIQUE (stream_id, version))"
        )
    raw_pool: psycopg_pool.AsyncConnectionPool[Any] = psycopg_pool.AsyncConnectionPool(
        PG,
        kwargs={"autocommit": True, "options": f"-c search_path={RAW_SCHEMA}"},
        min_size=POOL_SIZE,
        max_size=POOL_SIZE,
        open=False,
    )
    await raw_pool.open(wait=True)
    sync_store = EventStore.open(url)
    store = await AsyncEventStore.open(url)
    account_id = build_account(sync_store, args.size)
    sync_repo = Repository(sync_store, BankAccount, snapshot_every=None)
    async_repo = AsyncRepository(store, BankAccount, snapshot_every=None)
    # Warm every path once: connections opened, statements prepared.
    await async_appends(store, args.tasks, 1)
    await asyncio.to_thread(threaded_appends, sync_store, 16, 32)
    await raw_appends(raw_pool, args.tasks, 1)
    try:
        for _ in range(args.rounds):
            seconds, calls = await async_appends(store, args.tasks, args.each)
            results.add("concurrent", f"async, {args.tasks} tasks", total, seconds, calls)
            for threads in (4, 16):
                seconds, calls = await asyncio.to_thread(
                    threaded_appends, sync_store, threads, total
                )
                results.add("concurrent", f"sync, {threads} threads", total, seconds, calls)
            seconds, calls = await raw_appends(raw_pool, args.tasks, args.each)
            raw = f"raw psycopg async, {args.tasks} tasks"
            results.add("concurrent", raw, total, seconds, calls)

            lone_async, lone_sync = await lone_callers(store, sync_store, args.lone)
            results.add("lone", "async", args.lone, sum(lone_async), lone_async)
            results.add("lone", "sync", args.lone, sum(lone_sync), lone_sync)

            loads_async, loads_sync = await paired_loads(
                lambda: async_repo.load(account_id), lambda: sync_repo.load(account_id), args.loads
            )
            events = args.loads * args.size
            results.add("load", "async", events, sum(loads_async), loads_async)
            results.add("load", "sync", events, sum(loads_sync), loads_sync)
    finally:
        await store.close()
        sync_store.close()
        await raw_pool.close()

    print(f"PostgreSQL, {args.rounds} rounds; rates are medians over rounds, latencies per call")
    print(f"\n{args.tasks} writers, {total} one-event appends a round, a stream each:")
    for name in (
        f"async, {args.tasks} tasks",
        "sync, 4 threads",
        "sync, 16 threads",
        f"raw psycopg async, {args.tasks} tasks",
    ):
        print(results.line("concurrent", name))
    ours = f"async, {args.tasks} tasks"
    print(
        f"  async / 16 threads: {results.ratio('concurrent', ours, 'sync, 16 threads'):.2f}"
        " (goal: at least 1)"
    )
    print(f"  async / 4 threads: {results.ratio('concurrent', ours, 'sync, 4 threads'):.2f}")
    raw = f"raw psycopg async, {args.tasks} tasks"
    print(f"  async / raw psycopg async: {results.ratio('concurrent', ours, raw):.2f}")
    print(f"\na lone caller, {args.lone} one-event appends a round:")
    for name in ("async", "sync"):
        print(results.line("lone", name))
    lone_async_p50 = percentiles(results.latencies["lone", "async"])[0]
    lone_sync_p50 = percentiles(results.latencies["lone", "sync"])[0]
    print(f"  p50 async / sync: {lone_async_p50 / lone_sync_p50:.2f} (goal: at most 1.10)")
    print(f"\nloads of a {args.size}-event aggregate:")
    for name in ("async", "sync"):
        print(results.line("load", name))
    load_async = percentiles(results.latencies["load", "async"])[0]
    load_sync = percentiles(results.latencies["load", "sync"])[0]
    print(f"  p50 async / sync: {load_async / load_sync:.2f}")


if __name__ == "__main__":
    main()
