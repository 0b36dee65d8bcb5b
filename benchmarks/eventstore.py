"""The event store benchmark: `make bench` (or `python -m benchmarks.eventstore`).

Runs each scenario on our store, the `eventsourcing` library and raw psycopg,
interleaved round by round in one run so that load on this shared machine
falls on all of them alike, and prints events/s and the ratio to raw.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

from .contenders import (
    CONTENDERS,
    Contender,
    Library,
    Ours,
    Raw,
    RawLocked,
    concurrent_writer,
    reset_schema,
)

SPAWN = multiprocessing.get_context("spawn")


class Tally:
    """Events and seconds per scenario, contender and round."""

    def __init__(self) -> None:
        self.events: dict[tuple[str, str], int] = defaultdict(int)
        self.seconds: dict[tuple[str, str], float] = defaultdict(float)
        self.rounds: dict[tuple[str, str], dict[int, float]] = defaultdict(dict)

    def add(self, scenario: str, name: str, events: int, seconds: float, round: int) -> None:
        self.events[scenario, name] += events
        self.seconds[scenario, name] += seconds
        self.rounds[scenario, name][round] = events / seconds

    def rate(self, scenario: str, name: str) -> float:
        return self.events[scenario, name] / self.seconds[scenario, name]

    def ratio(self, scenario: str, name: str, reference: str) -> float:
        """The median over rounds of `name`'s rate over `reference`'s in the same round.

        Within a round the contenders ran back to back, so a round slowed by
        another tenant of the machine slows both sides of its ratio.
        """
        ours, theirs = self.rounds[scenario, name], self.rounds[scenario, reference]
        return statistics.median(ours[r] / theirs[r] for r in ours if r in theirs)


def timed(call: Callable[..., object], *args: object) -> tuple[float, object]:
    started = time.perf_counter()
    result = call(*args)
    return time.perf_counter() - started, result


def append_singles(contender: Contender, streams: list[object], count: int) -> None:
    for n in range(count):
        contender.append_one(streams[n % len(streams)], n)


def append_batches(contender: Contender, count: int) -> None:
    for _ in range(count):
        contender.append_batch(1000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--single", type=int, default=400, help="one-event appends a round")
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--concurrent", type=int, default=250, help="appends per writer a round")
    parser.add_argument("--batches", type=int, default=4, help="1,000-event appends a round")
    parser.add_argument("--scan", type=int, default=100_000, help="events in the scanned log")
    args = parser.parse_args()

    tally = Tally()
    contenders: list[Contender] = [Ours(), Library(), Raw()]
    for contender in contenders:
        reset_schema(contender.schema)
        contender.open()
    reset_schema(RawLocked.schema)

    print(f"one event per transaction: {args.rounds} rounds of {args.single}", flush=True)
    streams = {c.name: c.new_streams(20) for c in contenders}
    for r in range(args.rounds):
        for c in contenders[r % 3 :] + contenders[: r % 3]:
            seconds, _ = timed(append_singles, c, streams[c.name], args.single)
            tally.add("1 event / txn", c.name, args.single, seconds, r)

    print(f"{args.writers} writer processes, one event per transaction", flush=True)
    names = [Ours.name, Library.name, Raw.name, RawLocked.name]
    for c in contenders:  # the writers alone: an open app here stalled eventsourcing's writers
        c.close()
    for name in names:  # tables first: writers racing to create them would fail
        ready = CONTENDERS[name]()
        ready.open()
        ready.close()
    with SPAWN.Manager() as manager, ProcessPoolExecutor(args.writers, mp_context=SPAWN) as pool:
        for r in range(args.rounds):
            for name in names[r % 4 :] + names[: r % 4]:
                barrier = manager.Barrier(args.writers, timeout=60)
                futures = [
                    pool.submit(concurrent_writer, name, args.concurrent, barrier)
                    for _ in range(args.writers)
                ]
                try:
                    spans = [f.result() for f in futures]
                except threading.BrokenBarrierError:
                    print(f"  {name}: a writer failed before starting; round skipped", flush=True)
                    continue
                seconds = max(end for _, end in spans) - min(start for start, _ in spans)
                tally.add(
                    f"{args.writers} writers", name, args.writers * args.concurrent, seconds, r
                )

    for c in contenders:
        c.open()
    print(f"1,000 events per transaction: {args.rounds} rounds of {args.batches}", flush=True)
    for r in range(args.rounds):
        for c in contenders[r % 3 :] + contenders[: r % 3]:
            seconds, _ = timed(append_batches, c, args.batches)
            tally.add("1,000 events / txn", c.name, 1000 * args.batches, seconds, r)

    print(f"full scan with decoding: filling fresh logs with {args.scan:,} events", flush=True)
    for c in contenders:
        c.close()
        reset_schema(c.schema)
        c.open()
        append_batches(c, args.scan // 1000)
    for r in range(args.rounds):
        for c in contenders[r % 3 :] + contenders[: r % 3]:
            seconds, counted = timed(c.scan)
            tally.add("scan + decode", c.name, int(counted), seconds, r)  # type: ignore[call-overload]
    for c in contenders:
        c.close()

    report(tally, [Ours.name, Library.name, RawLocked.name], Raw.name)


def report(tally: Tally, names: list[str], reference: str) -> None:
    scenarios = list(dict.fromkeys(s for s, _ in tally.events))
    print(
        f"\nevents/s over all rounds, and as a share of {reference}: the median of the"
        " rounds' ratios (higher is better)\n"
    )
    header = f"| scenario | {reference} | " + " | ".join(names) + " |"
    print(header)
    print("|" + "---|" * (len(names) + 2))
    for scenario in scenarios:
        base = tally.rate(scenario, reference)
        cells = []
        for name in names:
            if (scenario, name) in tally.events:
                rate = tally.rate(scenario, name)
                cells.append(f"{rate:,.0f} ({tally.ratio(scenario, name, reference):.0%})")
            else:
                cells.append("")
        print(f"| {scenario} | {base:,.0f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
