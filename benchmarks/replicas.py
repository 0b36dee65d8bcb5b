"""Reads from a hot standby: what they cost the primary's writers, and what a reader gets.
`python -m benchmarks.replicas [--events 200000] [--seconds 5] [--rounds 3] [--json PATH]`.

A primary and a streaming standby of its own (`pg_basebackup -R`, on ports of their own,
as the tests make them; never the shared server). With `--pin` (the default on a machine
of two cores or more) the primary and its writer run on core 0 and the standby and the
readers' client processes on core 1, standing for two machines: without it, a standby on
the same cores as the primary takes the CPU its readers would have taken there, and no
placement of readers could spare the writers anything.

Interleaved over `--rounds`, the order turned each round:
- **catch-up**: `read_all` of the whole log (`--events`) through a store on the primary
  and through a store opened with the replica (reading the standby): events/s.
- **the writers' cost**: one writer process appending single events for `--seconds`
  while nobody reads, while `--readers` processes read the whole log again and again on
  the primary, and while they do on the standby: appends/s and the ratio to nobody
  reading (goal: readers on the standby cost the writer under 5%).
- **append to read model**: a writer appending 200 events a second, each carrying the
  time it was appended, and a projection runner applying them, reading the primary or
  the standby (its checkpoint and read model on the primary either way): p50 and p99 of
  the delay from append to the handler.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from eventcraft.eventstore import EventStore, NewEvent, RecordedEvent
from eventcraft.projections import ProjectionRunner, Subscription

from .record import Record

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # the tests' servers, which this benchmark borrows

from tests.replica_server import caught_up, replica_pair  # noqa: E402

BATCH = 1_000
RATE = 200
"""Events a second the read-model measure appends."""


def _pin(pid: int, cores: set[int]) -> None:
    """`pid` and its children on `cores` (a server's postmaster: its later backends too)."""
    children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    for each in [pid, *map(int, children.stdout.split())]:
        with contextlib.suppress(ProcessLookupError, PermissionError):  # gone, or not ours
            os.sched_setaffinity(each, cores)


def _postmaster(server: Any) -> int:
    return int((server.data / "postmaster.pid").read_text().split()[0])


def _with_replica(primary_url: str, standby_url: str) -> str:
    # The public way to name the replica: the store writes it into its URL (`?replica=`).
    with EventStore.open(primary_url, replicas=[standby_url]) as store:
        return store.url


def fill(url: str, events: int) -> None:
    with EventStore.open(url) as store:
        for start in range(0, events, BATCH):
            store.append(
                f"order-{start // 100}",
                [
                    NewEvent("Placed", {"n": n, "note": "x" * 64})
                    for n in range(start, start + BATCH)
                ],
            )


def _catch_up(url: str) -> float:
    with EventStore.open(url) as store:
        began = time.perf_counter()
        read = sum(1 for _ in store.read_all())
        took = time.perf_counter() - began
    return read / took


def _writer(url: str, seconds: float, core: int | None, out: Any) -> None:
    if core is not None:
        os.sched_setaffinity(0, {core})
    with EventStore.open(url) as store:
        deadline = time.monotonic() + seconds
        done = 0
        while time.monotonic() < deadline:
            store.append(f"w-{done % 50}", [NewEvent("Written", {"n": done})])
            done += 1
    out.put(done / seconds)


def _reader(url: str, stop: Any, core: int | None) -> None:
    if core is not None:
        os.sched_setaffinity(0, {core})
    with EventStore.open(url) as store:
        while not stop.is_set():
            for _ in store.read_all():
                if stop.is_set():
                    break


def _writers_rate(
    primary: str, readers_url: str | None, readers: int, seconds: float, pin: bool
) -> float:
    context = multiprocessing.get_context("spawn")
    out, stop = context.Queue(), context.Event()
    reading = [
        context.Process(target=_reader, args=(readers_url, stop, 1 if pin else None))
        for _ in range(readers if readers_url else 0)
    ]
    for process in reading:
        process.start()
    time.sleep(1.0 if reading else 0)  # the readers at work before the writer starts
    writer = context.Process(target=_writer, args=(primary, seconds, 0 if pin else None, out))
    writer.start()
    rate = float(out.get(timeout=seconds + 60))
    writer.join()
    stop.set()
    for process in reading:
        process.join(30)
    return rate


def _append_to_read_model(primary: str, read_url: str, seconds: float) -> list[float]:
    delays: list[float] = []

    def handle(event: RecordedEvent) -> None:
        delays.append(time.time() - event.data["t"])

    timed = Subscription(f"delay-{time.monotonic_ns()}", handle, types=["Timed"])

    with (
        EventStore.open(read_url) as reading,
        EventStore.open(primary) as writing,
        ProjectionRunner(reading, [timed]) as runner,
    ):
        runner.catch_up()
        delays.clear()
        runner.start()
        deadline = time.monotonic() + seconds
        next_at = time.monotonic()
        while time.monotonic() < deadline:
            writing.append("timed-1", [NewEvent("Timed", {"t": time.time()})])
            next_at += 1 / RATE
            time.sleep(max(0.0, next_at - time.monotonic()))
        runner.wait_until(writing.high_water_mark(), timeout=60)
    return delays


def _quantiles(delays: list[float]) -> dict[str, float]:
    cuts = statistics.quantiles(delays, n=100, method="inclusive")
    return {"p50_ms": cuts[49] * 1000, "p99_ms": cuts[98] * 1000, "events": len(delays)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=200_000, help="the log read to catch up")
    parser.add_argument("--seconds", type=float, default=5.0, help="each writer's run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--readers", type=int, default=2, help="reader processes")
    parser.add_argument(
        "--pin",
        action=argparse.BooleanOptionalAction,
        default=(os.cpu_count() or 1) >= 2,
        help="primary and writer on core 0, standby and readers on core 1",
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the record here")
    args = parser.parse_args()
    record = Record("replicas", args)
    with replica_pair() as (primary_server, standby_server):
        if args.pin:
            _pin(_postmaster(primary_server), {0})
            _pin(_postmaster(standby_server), {1})
            os.sched_setaffinity(0, {1})  # this process reads and runs the runner
        primary = primary_server.url
        replica = _with_replica(primary, standby_server.url)
        fill(primary, args.events)
        caught_up(primary_server, standby_server, timeout=600)
        catch_up: dict[str, list[float]] = {"primary": [], "standby": []}
        writes: dict[str, list[float]] = {"none": [], "primary": [], "standby": []}
        delays: dict[str, list[float]] = {"primary": [], "standby": []}
        for round_ in range(args.rounds):
            order = ["primary", "standby"] if round_ % 2 == 0 else ["standby", "primary"]
            for where in order:
                catch_up[where].append(_catch_up(primary if where == "primary" else replica))
            sides = ["none", "primary", "standby"]
            for where in sides if round_ % 2 == 0 else sides[::-1]:
                url = None if where == "none" else primary if where == "primary" else replica
                writes[where].append(
                    _writers_rate(primary, url, args.readers, args.seconds, args.pin)
                )
            for where in order:
                delays[where] += _append_to_read_model(
                    primary, primary if where == "primary" else replica, args.seconds
                )
            caught_up(primary_server, standby_server, timeout=600)
    results: dict[str, Any] = {
        "catch_up_events_per_second": {k: statistics.median(v) for k, v in catch_up.items()},
        "writer_appends_per_second": {k: statistics.median(v) for k, v in writes.items()},
        "writer_rounds": writes,
        "append_to_read_model": {k: _quantiles(v) for k, v in delays.items()},
        "pinned": args.pin,
    }
    rates = results["writer_appends_per_second"]
    print(
        f"catch-up of {args.events:,} events (events/s): "
        + ", ".join(f"{k} {v:,.0f}" for k, v in results["catch_up_events_per_second"].items())
    )
    print(
        f"one writer's appends/s: nobody reading {rates['none']:,.0f}; "
        f"{args.readers} readers on the primary {rates['primary']:,.0f} "
        f"({rates['primary'] / rates['none']:.2f}x); on the standby {rates['standby']:,.0f} "
        f"({rates['standby'] / rates['none']:.2f}x; goal >= 0.95x)"
    )
    for where, found in results["append_to_read_model"].items():
        print(
            f"append to read model through the {where}: p50 {found['p50_ms']:.1f} ms, "
            f"p99 {found['p99_ms']:.1f} ms ({found['events']:,} events)"
        )
    print(f"pinned: {args.pin}")
    if args.json:
        record.write(args.json, results)


if __name__ == "__main__":
    main()
