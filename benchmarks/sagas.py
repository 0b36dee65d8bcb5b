"""The sagas benchmark: `python -m benchmarks.sagas` (in `make bench`).

A 3-step saga of no-op steps, started and run to completion one instance
after another by one orchestrator, on a SQLite file and on PostgreSQL:
sagas per second, and the cost each step adds over calling the three
steps directly (every step records two transitions, and the saga two more).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from eventcraft.eventstore import EventStore
from eventcraft.sagas import Orchestrator, Saga, Step, StepContext

from .contenders import PG, reset_schema

SCHEMA = "bench_sagas"


def nothing(data: dict[str, Any], context: StepContext) -> None:
    return None


saga = Saga("noop", [Step(f"step{n}", nothing, nothing) for n in range(3)])


def run_sagas(store: EventStore, count: int, offset: int) -> float:
    orchestrator = Orchestrator(store, [saga])
    started = time.perf_counter()
    for n in range(offset, offset + count):
        saga_id = orchestrator.start(saga, {"n": n}, saga_id=str(n))
        assert orchestrator.advance("noop", saga_id).status == "completed"
    return time.perf_counter() - started


def call_directly(count: int) -> float:
    context = StepContext("x", "step", 1, "key", "x", {})
    started = time.perf_counter()
    for n in range(count):
        for step in saga.steps:
            step.action({"n": n}, context)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sagas", type=int, default=300, help="instances per round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    reset_schema(SCHEMA)
    steps = len(saga.steps)
    print(f"{steps}-step no-op saga, run to completion, {args.sagas} instances per round")
    print(f"{'backend':<12} {'sagas/s':>9} {'per saga':>10} {'per step':>10} {'direct/step':>12}")
    with tempfile.TemporaryDirectory() as directory:
        urls = {
            "sqlite": f"sqlite:///{Path(directory) / 'sagas.db'}",
            "postgresql": f"{PG}?schema={SCHEMA}",
        }
        for backend, url in urls.items():
            with EventStore.open(url) as store:
                seconds = [run_sagas(store, args.sagas, r * args.sagas) for r in range(args.rounds)]
            direct = statistics.median(call_directly(args.sagas) for _ in range(args.rounds))
            median = statistics.median(seconds)
            per_saga = median / args.sagas
            overhead = (median - direct) / (args.sagas * steps)
            print(
                f"{backend:<12} {args.sagas / median:>9,.0f} {per_saga * 1000:>8.2f} ms "
                f"{overhead * 1000:>8.2f} ms {direct / (args.sagas * steps) * 1e6:>9.2f} µs",
                flush=True,
            )


if __name__ == "__main__":
    main()
