"""The aggregate load benchmark: `python -m benchmarks.aggregates`.

Loads accounts of 10 to 10,000 events, with and without snapshots, through
our repository, through the `eventsourcing` library's, and as a raw
read-and-decode of the same rows (psycopg and orjson, no objects), each
round interleaving the contenders, and prints median times and ratios.
Snapshots are taken every 100 events but not in the last 99, so a load with
snapshots reads the longest tail it can meet: 99 events after the snapshot.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from functools import partial
from typing import Any

import orjson
import psycopg
from eventcraft.domain import Repository
from eventcraft.eventstore import EventStore

from examples.bank import BankAccount

from .contenders import NOTE, PG, library_env, reset_schema

SAVE_EVERY = 7  # events per save while building: snapshots fall at uneven distances
SNAPSHOT_EVERY = 100
OURS_SCHEMA = "bench_agg_ours"
LIBRARY_SCHEMA = "bench_agg_es"

Load = Callable[[], object]
Save = Callable[[Any], object]


def tail_start(size: int) -> int:
    """The version after which no snapshot is taken: loads then read the worst-case tail."""
    return max(size - (SNAPSHOT_EVERY - 1), 0)


def build(account: Any, save_snapshotting: Save, save_plain: Save, size: int) -> None:
    """Deposit until `account` holds `size` events, saving every few, as real use would."""
    for n in range(size - 1):
        account.deposit(n + 1, NOTE)
        if account.version % SAVE_EVERY == 0 or account.version == tail_start(size):
            (save_snapshotting if account.version <= tail_start(size) else save_plain)(account)
    save_plain(account)


def build_ours(store: EventStore, size: int) -> str:
    snapshotting = Repository(store, BankAccount, snapshot_every=SNAPSHOT_EVERY)
    plain = Repository(store, BankAccount, snapshot_every=None)
    account = BankAccount(uuid.uuid4().hex)
    account.open("bench")
    build(account, snapshotting.save, plain.save, size)
    return account.id


def library_app(snapshots: bool) -> Any:
    from eventsourcing.application import Application

    from .library_aggregate import Account

    class Bank(Application[Any]):
        name = "Bank"  # its tables are named after the application: both share them

    class SnapshottingBank(Bank):
        name = "Bank"
        snapshotting_intervals = {Account: SNAPSHOT_EVERY}  # noqa: RUF012 (its API)

    env = library_env(LIBRARY_SCHEMA, IS_SNAPSHOTTING_ENABLED="y" if snapshots else "n")
    return (SnapshottingBank if snapshots else Bank)(env=env)


def build_library(snapshotting: Any, plain: Any, size: int) -> Any:
    from .library_aggregate import Account

    account = Account()
    build(account, snapshotting.save, plain.save, size)
    return account.id


def raw_reader(conn: psycopg.Connection[Any], stream_id: str) -> Load:
    query = (
        "SELECT version, type, data::text FROM eventcraft_events "
        "WHERE stream_id = %s ORDER BY version"
    )

    def load() -> object:
        rows = conn.execute(query, (stream_id,)).fetchall()
        return [(version, type_, orjson.loads(data)) for version, type_, data in rows]

    return load


def median_ms(load: Load, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        load()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="10,100,1000,10000")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=5, help="loads per contender per round")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    for schema in (OURS_SCHEMA, LIBRARY_SCHEMA):
        reset_schema(schema)
    store = EventStore.open(f"{PG}?schema={OURS_SCHEMA}")
    es_snapshots, es_plain = library_app(True), library_app(False)
    raw = psycopg.connect(PG, autocommit=True, options=f"-c search_path={OURS_SCHEMA}")
    ours_plain = Repository(store, BankAccount, snapshot_every=None)
    ours_snap = Repository(store, BankAccount, snapshot_every=SNAPSHOT_EVERY)

    contenders: dict[tuple[int, str], Load] = {}
    for size in sizes:
        print(f"building {size}-event accounts...", flush=True)
        ours_id = build_ours(store, size)
        es_id = build_library(es_snapshots, es_plain, size)
        contenders[size, "raw"] = raw_reader(raw, BankAccount.stream_id_of(ours_id))
        contenders[size, "ours"] = partial(ours_plain.load, ours_id)
        contenders[size, "ours+snap"] = partial(ours_snap.load, ours_id)
        contenders[size, "es"] = partial(es_plain.repository.get, es_id)
        contenders[size, "es+snap"] = partial(es_snapshots.repository.get, es_id)
        balance = ours_plain.load(ours_id).state.balance_cents
        assert balance == ours_snap.load(ours_id).state.balance_cents == size * (size - 1) // 2
        assert es_plain.repository.get(es_id).balance == balance

    results: dict[tuple[int, str], list[float]] = defaultdict(list)
    for round_ in range(args.rounds):
        print(f"round {round_ + 1}/{args.rounds}", flush=True)
        for key, load in contenders.items():
            results[key].append(median_ms(load, args.repeat))

    ms = {key: statistics.median(values) for key, values in results.items()}

    def ratio(size: int, name: str) -> float:
        # Per round, then the median: a round slowed by another tenant of the
        # machine slows both sides of its ratio.
        pairs = zip(results[size, name], results[size, "raw"], strict=True)
        return statistics.median(ours / raw for ours, raw in pairs)

    print(
        "\nMedian load time in ms (and the median over rounds of its ratio to the raw "
        "read-and-decode of the same rows)\n"
    )
    print(
        "| events | raw | eventcraft | eventcraft + snapshots | eventsourcing 9.5 | "
        "eventsourcing + snapshots |"
    )
    print("|---|---|---|---|---|---|")
    for size in sizes:
        base = ms[size, "raw"]
        cells = [
            f"{ms[size, name]:.2f} ({ratio(size, name):.1f}x)"
            for name in ("ours", "ours+snap", "es", "es+snap")
        ]
        print(f"| {size:,} | {base:.2f} | " + " | ".join(cells) + " |")
    if 100 in sizes and 10_000 in sizes:
        flat = ms[10_000, "ours+snap"] / ms[100, "ours+snap"]
        print(
            f"\neventcraft with snapshots: 10,000 events load in {flat:.2f}x "
            "the time of 100 (target: within 2x)"
        )
    if 1000 in sizes:
        print(f"eventcraft, 1,000 events: {ratio(1000, 'ours'):.2f}x raw (target: within 3x)")
    store.close()
    raw.close()
    es_snapshots.close()
    es_plain.close()


if __name__ == "__main__":
    main()
