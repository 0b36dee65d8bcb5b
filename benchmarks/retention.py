"""What a retention run costs on PostgreSQL, and what appends keep meanwhile:
`python -m benchmarks.retention [--events 2000000]`.

The store holds `--events` events, half of them in category `old` recorded
40 days ago (in streams of 1,000), half recent in `live`. A run with the
policy `old: older than 30 days` archives the whole log up to the head with
pyarrow, then removes the old events (all but each stream's newest) in one
transaction. Meanwhile another process appends one event at a time; its rate
is measured during the run and, as the reference, for as long before the run
and again after it. Prints the run's time and rates, and the appends' ratio.
"""

from __future__ import annotations

import argparse
import multiprocessing
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from multiprocessing.synchronize import Event

import psycopg
from eventcraft.eventstore import EventStore, NewEvent
from eventcraft.eventstore.retention import RetentionPolicy

from eventcraft.operations import retention

from .contenders import PG

SPAWN = multiprocessing.get_context("spawn")
_BATCH = 1000


def _fill(store: EventStore, events: int) -> None:
    old = datetime.now(UTC) - timedelta(days=40)
    half = events // 2
    for n in range(0, half, _BATCH):
        batch = [
            NewEvent("Logged", {"n": n + i, "note": "x" * 60}, recorded_at=old)
            for i in range(_BATCH)
        ]
        store.append(f"old-{n // _BATCH}", batch)
    for n in range(0, events - half, _BATCH):
        batch = [NewEvent("Logged", {"n": n + i, "note": "y" * 60}) for i in range(_BATCH)]
        store.append(f"live-{n // _BATCH}", batch)


def _append(url: str, started: Event, stop: Event, counts: multiprocessing.Queue[int]) -> None:
    """Another process: one-event appends until told to stop, counted per 0.1 s slot."""
    with EventStore.open(url) as store:
        stream = f"bench-{uuid.uuid4().hex[:8]}"
        started.set()
        done = 0
        while not stop.is_set():
            store.append(stream, [NewEvent("Ticked", {"n": done})])
            done += 1
        counts.put(done)


def _appends_during(
    url: str, seconds: float | None, work: Callable[[], object] | None = None
) -> tuple[float, float]:
    """Appends/s of another process while `work` runs (or for `seconds`), and the seconds."""
    started, stop, counts = SPAWN.Event(), SPAWN.Event(), SPAWN.Queue()
    writer = SPAWN.Process(target=_append, args=(url, started, stop, counts))
    writer.start()
    started.wait(60)
    began = time.perf_counter()
    if work is not None:
        work()
    else:
        time.sleep(seconds or 0)
    took = time.perf_counter() - began
    stop.set()
    done = counts.get(timeout=60)
    writer.join(60)
    return done / took, took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--pace", type=float, default=1.0, help="the run's pace (0 to 1]")
    options = parser.parse_args()
    schema = f"bench_retention_{uuid.uuid4().hex[:8]}"
    url = f"{PG}?schema={schema}"
    try:
        with EventStore.open(url) as store, tempfile.TemporaryDirectory() as folder:
            started = time.perf_counter()
            _fill(store, options.events)
            print(f"filled {options.events:,} events in {time.perf_counter() - started:.0f} s")
            policies = [RetentionPolicy("old", max_age=timedelta(days=30))]
            planned = retention.plan(store, policies, [], folder)
            print(f"plan: up to {planned.up_to:,}, removes {planned.removals[0].events:,}")
            report: list[retention.RetentionReport] = []
            probe, _ = _appends_during(url, 10.0)
            during, took = _appends_during(
                url,
                None,
                lambda: report.append(
                    retention.apply(store, policies, [], folder, pace=options.pace)
                ),
            )
            after, _ = _appends_during(url, min(took, 60.0))
            done = report[0]
            reference = (probe + after) / 2
            print(
                f"run at pace {options.pace}: {took:.1f} s; archived {done.archived:,} events in "
                f"{done.archive_seconds:.1f} s ({done.archived / done.archive_seconds:,.0f}/s), "
                f"removed {done.run.removed:,} in {done.remove_seconds:.1f} s "
                f"({done.run.removed / done.remove_seconds:,.0f}/s)"
            )
            print(
                f"appends: {during:,.0f}/s during the run, {reference:,.0f}/s without it "
                f"(before {probe:,.0f}, after {after:,.0f}): ratio {during / reference:.2f}"
            )
    finally:
        with psycopg.connect(PG, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


if __name__ == "__main__":
    main()
