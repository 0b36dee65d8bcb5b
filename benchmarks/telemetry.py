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


@contextmanager
def _sdk() -> Iterator[None]:
    from opentelemetry import metrics, trace
    from opentelemetry.metrics import _internal as metrics_internal
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.util._once import Once

    # Spans are made, recorded and ended, then dropped: no processor exports them.
    tracer_provider = TracerProvider()
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])

    def reset() -> None:  # as opentelemetry-test-utils does between tests
        trace._TRACER_PROVIDER = None
        trace._TRACER_PROVIDER_SET_ONCE = Once()
        metrics_internal._METER_PROVIDER = None
        metrics_internal._METER_PROVIDER_SET_ONCE = Once()

    reset()
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(meter_provider)
    try:
        yield
    finally:
        reset()
        tracer_provider.shutdown()
        meter_provider.shutdown()


def run(store: EventStore, name: str, count: int, batch: int) -> float:
    """Events per second of `count` appends of `batch` events each, the way `name` says."""
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
        seconds = time.perf_counter() - started
    return count * batch / seconds


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
                        # Each round in another order, so that none always goes first.
                        order = WAYS[round_ % 4 :] + WAYS[: round_ % 4]
                        measured = {n: run(store, n, count, batch) for n in order}
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
