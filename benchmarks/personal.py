"""What personal fields cost, and what stores without them pay: `python -m benchmarks.personal`.

On each backend, one store holds as many plain events as events with two
personal fields (`Personal`, sealed with AES-GCM). Each way below runs in
slices taken in turn, in another order each round, so that load on this
shared machine falls on all alike; it prints events/s and the median over
rounds of each way's rate over its reference's in the same round:

- `read_all plain` / `read_stream_encoded plain`: the store's read of plain
  events against the backend's own read of them (the reference), which is
  what the read was before personal fields: the cost of the check every
  event gets;
- `read_all sealed`: reading the sealed events (opened, keys cached)
  against reading as many plain ones through the store;
- `append plain`: one-event appends through the store against the checked
  call straight to the backend; `append sealed`: appends of a sealed event
  against plain ones through the store.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import psycopg
from eventcraft.eventstore import ANY, EventStore, NewEvent, Personal
from eventcraft.eventstore import arguments as store_arguments
from pydantic import BaseModel

from .contenders import PG

SLICES = 5


class Plain(BaseModel):
    customer_id: str
    name: str
    email: str
    plan: str


class Sealed(BaseModel):
    customer_id: str
    name: Annotated[str, Personal(subject="customer_id")]
    email: Annotated[str, Personal(subject="customer_id")]
    plan: str


def _fill(store: EventStore, count: int) -> None:
    """`count` plain events in category `plain` and as many sealed in `sealed`, ten a stream."""
    for n in range(0, count, 10):
        who = f"c{n // 10}"
        fields = {"customer_id": who, "name": f"Name {n}", "email": f"{who}@x.ex", "plan": "gold"}
        store.append(f"plain-{who}", [NewEvent("Registered", Plain(**fields)) for _ in range(10)])
        store.append(f"sealed-{who}", [NewEvent("Registered", Sealed(**fields)) for _ in range(10)])


def _ways(store: EventStore, count: int) -> dict[str, tuple[Callable[[], int], Callable[[], int]]]:
    """Each way's measured call and its reference; both return the events they handled."""
    backend = store._backend
    streams = [f"plain-c{n}" for n in range(count // 10)]

    def read_all(categories: str) -> Callable[[], int]:
        return lambda: sum(1 for _ in store.read_all(categories=categories))

    def backend_read_all() -> int:
        events = backend.read_all(after=0, limit=None, categories=("plain",), types=None)
        return sum(1 for _ in events)

    def encoded_streams() -> int:
        return sum(sum(1 for _ in store.read_stream_encoded(s)) for s in streams)

    def backend_encoded_streams() -> int:
        return sum(sum(1 for _ in backend.read_stream_encoded(s, from_version=1)) for s in streams)

    def appends(make: Callable[[int], BaseModel], direct: bool) -> Callable[[], int]:
        def append() -> int:
            stream = f"appended-{uuid.uuid4().hex[:12]}"
            for n in range(200):
                events = [NewEvent("Registered", make(n))]
                if direct:
                    call = store_arguments.append_call(stream, events, ANY, store.max_event_bytes)
                    backend.append(*call)
                else:
                    store.append(stream, events)
            return 200

        return append

    def fields(n: int) -> dict[str, str]:
        return {"customer_id": f"a{n % 20}", "name": "Ada", "email": "a@x.ex", "plan": "gold"}

    return {
        "read_all plain": (read_all("plain"), backend_read_all),
        "read_stream_encoded plain": (encoded_streams, backend_encoded_streams),
        "read_all sealed": (read_all("sealed"), read_all("plain")),
        "append plain": (
            appends(lambda n: Plain(**fields(n)), False),
            appends(lambda n: Plain(**fields(n)), True),
        ),
        "append sealed": (
            appends(lambda n: Sealed(**fields(n)), False),
            appends(lambda n: Plain(**fields(n)), False),
        ),
    }


def _measure(call: Callable[[], int]) -> tuple[int, float]:
    started = time.perf_counter()
    done = call()
    return done, time.perf_counter() - started


def bench(url: str, count: int, rounds: int, label: str) -> None:
    with EventStore.open(url) as store:
        _fill(store, count)
        ways = _ways(store, count)
        for name, (measured, reference) in ways.items():
            rates: dict[str, list[float]] = defaultdict(list)
            for round_ in range(rounds + 1):
                pair = [("way", measured), ("reference", reference)]
                order = pair if round_ % 2 else pair[::-1]
                done = dict.fromkeys(("way", "reference"), 0)
                seconds = dict.fromkeys(("way", "reference"), 0.0)
                for _ in range(SLICES):
                    for which, call in order:
                        events, took = _measure(call)
                        done[which] += events
                        seconds[which] += took
                if round_ == 0:
                    continue  # warm-up: caches, connections, the key store's first look
                for which in done:
                    rates[which].append(done[which] / seconds[which])
            ratios = [w / r for w, r in zip(rates["way"], rates["reference"], strict=True)]
            print(
                f"{label:9} {name:26} {statistics.median(rates['way']):10,.0f} "
                f"{statistics.median(rates['reference']):10,.0f} {statistics.median(ratios):7.3f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=20_000, help="plain events (and sealed)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--backends", default="memory,sqlite,postgres")
    options = parser.parse_args()
    print(f"{'backend':9} {'way':26} {'events/s':>10} {'reference':>10} {'ratio':>7}")
    for backend in options.backends.split(","):
        if backend == "postgres":
            schema = f"bench_personal_{uuid.uuid4().hex[:8]}"
            try:
                bench(f"{PG}?schema={schema}", options.events, options.rounds, backend)
            finally:
                with psycopg.connect(PG, autocommit=True) as conn:
                    conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
            continue
        with tempfile.TemporaryDirectory() as folder:
            url = "memory://" if backend == "memory" else f"sqlite:///{Path(folder) / 'b.db'}"
            bench(url, options.events, options.rounds, backend)


if __name__ == "__main__":
    main()
