"""What telemetry costs an append: `python -m benchmarks.telemetry`.

The same loop of one-event appends (and of 100-event batches) runs four ways,
interleaved round by round so that load on this shared machine falls on all
alike, on each backend:

- `before`: the store's append path as it was before telemetry (the checked
  call straight to the backend), the reference;
- `no-api`: `EventStore.append` as if `opentelemetry-api` were not installed;
- `no-sdk`: `EventStore.append` with the API installed and no SDK configured
  (the default for a user who installed the `otel` extra and set nothing up);
- `sdk`: with an SDK tracer and meter provider whose spans go nowhere (what
  recording itself costs).

It prints events/s and the median over rounds of each way's rate over
`before`'s in the same round.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from eventcraft.eventstore import ANY, EventStore, NewEvent
from eventcraft.eventstore import arguments as store_arguments
from eventcraft.eventstore import telemetry as store_telemetry

from .contenders import PG

WAYS = ("before", "no-api", "no-sdk", "sdk")
SLICES = 10


def append_before(store: EventStore, stream: str, events: list[NewEvent]) -> None:
    """The append path without its telemetry hook: what `EventStore.append` did before."""
    call = store_arguments.append_call(stream, events, ANY, store.max_event_bytes)
    store._backend.append(*call)


@contextmanager
def way(name: str) -> Iterator[None]:
    """Telemetry set up as `name` says, for the time of the block."""
    if name == "no-api":
        # What the module holds when its `import opentelemetry` failed.
        module = vars(store_telemetry)
        saved = {name: module[name] for name in ("otel_trace", "otel_metrics", "metrics_globals")}
        module.update(dict.fromkeys(saved))
        try:
            yield
        finally:
            module.update(saved)
    elif name == "sdk":
        with _sdk():
            yield
    else:
        yield


_providers: list[object] = []


@contextmanager
def _sdk() -> Iterator[None]:
    """One SDK tracer and meter provider for the whole run, set as the globals for the block.

    Spans are made, recorded and ended, then dropped: no processor exports them. The
    globals are set and cleared directly (as opentelemetry-test-utils does between
    tests), so that the providers, and the instruments made on them, are made once.
    """
    from opentelemetry import trace
    from opentelemetry.metrics import _internal as metrics_internal
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider

    if not _providers:
        _providers.extend(
            [TracerProvider(), MeterProvider(metric_readers=[InMemoryMetricReader()])]
        )
    trace._TRACER_PROVIDER, metrics_internal._METER_PROVIDER = _providers  # type: ignore[assignment]
    try:
        yield
    finally:
        trace._TRACER_PROVIDER = None
        metrics_internal._METER_PROVIDER = None


def run(store: EventStore, name: str, count: int, batch: int) -> float:
    """Seconds `count` appends of `batch` events each take, the way `name` says."""
    streams = [f"bench-{uuid.uuid4().hex[:12]}-{n}" for n in range(10)]
    batches = [[NewEvent("Ticked", {"n": n, "i": i}) for i in range(batch)] for n in range(count)]
    append: Callable[[str, list[NewEvent]], object]
    if name == "before":

        def append(stream: str, events: list[NewEvent]) -> object:
            append_before(store, stream, events)
            return None
    else:
        append = store.append
    with way(name):
        started = time.perf_counter()
        for n, events in enumerate(batches):
            append(streams[n % len(streams)], events)
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--single", type=int, default=300, help="one-event appends a round")
    parser.add_argument("--batches", type=int, default=20, help="100-event appends a round")
    parser.add_argument("--backends", default="memory,sqlite,postgres")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        urls = {
            "memory": "memory://",
            "sqlite": f"sqlite:///{Path(folder) / 'bench.db'}",
            "postgres": PG,
        }
        print(f"{'backend':9} {'scenario':10} {'way':7} {'events/s':>10} {'ratio':>7}")
        for backend in options.backends.split(","):
            with EventStore.open(urls[backend]) as store:
                for scenario, count, batch in (
                    ("single", options.single, 1),
                    ("batch100", options.batches, 100),
                ):
                    rates: dict[str, list[float]] = defaultdict(list)
                    for round_ in range(options.rounds + 1):
                        # Each round in another order, so that none always goes first, and
                        # in slices taken in turn, so that a burst of the machine's other
                        # work falls on every way alike.
                        order = WAYS[round_ % 4 :] + WAYS[: round_ % 4]
                        seconds = dict.fromkeys(order, 0.0)
                        for _ in range(SLICES):
                            for n in order:
                                seconds[n] += run(store, n, max(count // SLICES, 1), batch)
                        done = max(count // SLICES, 1) * SLICES * batch
                        measured = {n: done / seconds[n] for n in order}
                        if round_ == 0:
                            continue  # warm-up: caches, connections, the SDK's imports
                        for n, rate in measured.items():
                            rates[n].append(rate)
                    for n in WAYS:
                        ratios = [r / b for r, b in zip(rates[n], rates["before"], strict=True)]
                        print(
                            f"{backend:9} {scenario:10} {n:7} "
                            f"{statistics.median(rates[n]):10,.0f} "
                            f"{statistics.median(ratios):7.3f}"
                        )


if __name__ == "__main__":
    main()
