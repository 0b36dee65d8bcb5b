"""The projections benchmark: `python -m benchmarks.projections` (in `make bench`).

1. Rebuild throughput: an in-process rebuild of a simple fold (balance per
   account) over logs of 100,000 and 1,000,000 events, against a raw scan
   of the same rows with decoding (a binary server-side psycopg cursor,
   JSON decoded by orjson), interleaved round by round; events/s and ratio.
2. Latency from append to read model: a runner follows the log (woken by
   LISTEN/NOTIFY) while one event at a time is appended; the time from
   calling `append` to `wait_until` returning, p50 and p99.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid

import sqlalchemy as sa
from eventcraft.eventstore import EventStore, NewEvent, RecordedEvent
from eventcraft.projections import Fold, ProjectionRunner, State, StreamKey

from .contenders import PG, Raw, payload, reset_schema

SCHEMA = "bench_projections"
PER_STREAM = 100

metadata = sa.MetaData()
balances_table = sa.Table(
    "bench_balances",
    metadata,
    sa.Column("account_id", sa.Text, primary_key=True),
    sa.Column("balance", sa.BigInteger, nullable=False),
)


def _add(state: State, event: RecordedEvent) -> State:
    return {**state, "balance": state["balance"] + event.data["amount_cents"]}


balances = Fold(
    "bench-balances",
    table=balances_table,
    key=StreamKey(),
    initial=lambda key: {"account_id": key, "balance": 0},
    apply=_add,
)


def fill(store: EventStore, events: int) -> None:
    have = store.high_water_mark()
    while have < events:
        size = min(PER_STREAM, events - have)
        batch = [NewEvent("Deposited", payload(n)) for n in range(size)]
        have = store.append(f"account-{uuid.uuid4().hex}", batch, 0).positions[-1]


class RawHere(Raw):
    """The store benchmark's raw scan (every column, JSON decoded), over this log."""

    schema = SCHEMA


def raw_scan() -> int:
    raw = RawHere()
    raw.open()
    try:
        return raw.scan()
    finally:
        raw.close()


def rebuild(runner: ProjectionRunner) -> int:
    return runner.rebuild("bench-balances").events


def throughput(runner: ProjectionRunner, rounds: int) -> tuple[float, float]:
    rates: dict[str, list[float]] = {"raw": [], "ours": []}
    for _ in range(rounds):
        for name, run in (("raw", raw_scan), ("ours", lambda: rebuild(runner))):
            started = time.perf_counter()
            count = run()
            rates[name].append(count / (time.perf_counter() - started))
    return statistics.median(rates["raw"]), statistics.median(rates["ours"])


def latency(store: EventStore, runner: ProjectionRunner, samples: int) -> list[float]:
    runner.start()
    runner.wait_until(store.high_water_mark(), timeout=600)
    seconds = []
    for n in range(samples):
        time.sleep(0.01)  # let the follower go idle: the wake-up is what is measured
        started = time.perf_counter()
        position = store.append("account-latency", [NewEvent("Deposited", payload(n))])
        runner.wait_until(position.positions[0], timeout=30)
        seconds.append(time.perf_counter() - started)
    runner.stop()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,1000000", help="log sizes, comma-separated")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--samples", type=int, default=300, help="latency samples")
    args = parser.parse_args()
    reset_schema(SCHEMA)
    url = f"{PG}?schema={SCHEMA}"
    print("rebuild of a balance-per-account fold, against a raw scan with decoding (PostgreSQL)")
    print(f"{'events':>10} {'raw scan ev/s':>14} {'rebuild ev/s':>13} {'ratio':>6}")
    with EventStore.open(url) as store, ProjectionRunner(store, [balances]) as runner:
        for size in (int(s) for s in args.sizes.split(",")):
            fill(store, size)
            raw, ours = throughput(runner, args.rounds)
            print(f"{size:>10,} {raw:>14,.0f} {ours:>13,.0f} {ours / raw:>6.0%}", flush=True)
        seconds = sorted(latency(store, runner, args.samples))
    ms = [s * 1000 for s in seconds]
    p50, p99 = ms[len(ms) // 2], ms[min(int(len(ms) * 0.99), len(ms) - 1)]
    print(
        f"\nappend -> read model (LISTEN/NOTIFY), {len(ms)} samples: "
        f"p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {ms[-1]:.1f} ms"
    )


if __name__ == "__main__":
    main()
