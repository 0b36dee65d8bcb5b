"""The console's pages on a large log: `python -m benchmarks.console [--events N,...]`.

Fills one log per size in `--events` (PostgreSQL by default, `--backend sqlite`
too): streams of 100 events appended in one batch each, nine in ten of category
`account`, one in ten `transfer`, and one stream of `audit` per 100,000 events.
Then times, interleaved round by round, the p95 of a request for each of these
pages, served by uvicorn in this process and asked over HTTP (one kept-alive
connection, the response read whole):

- Log: `/log`, the newest page;
- filtered Log: `/log?category=transfer` (a tenth of the log) and
  `/log?category=audit` (rare);
- Stream: `/stream?id=...`, a stream in the middle of the log;
- Event: `/events/P`, an event in the middle of the log.

The reference is the smallest size: the goal is every page under 200 ms at the
largest size, as on the smallest, so the ratios large/small are printed.

Then, at each size, the whole log three ways, best of `--downloads` runs: the
download `/log.ndjson` (the export's lines, streamed), the same download made
per event as a filter that passes all forces (`?since=1970-01-01T00:00`, what
every download did before), and `eventcraft export` to /dev/null; the ratio of
the download to the export is printed.
"""

from __future__ import annotations

import argparse
import http.client
import os
import socket
import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from eventcraft.eventstore import EventStore, NewEvent

from eventcraft import App
from eventcraft.console import create_app
from eventcraft.operations.transfer import export_events

from .contenders import PG, reset_schema


def drop_schema(name: str) -> None:
    """A 10-million-event log is gigabytes: it does not outlive the run."""
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


STREAM = 100
GOAL_MS = 200.0


def fill(store: EventStore, events: int) -> None:
    started = time.perf_counter()
    streams = events // STREAM
    rare_every = max(streams // max(events // 100_000, 1), 1)
    for n in range(streams):
        category = "transfer" if n % 10 == 5 else "account"
        if n % rare_every == rare_every // 2:
            category = "audit"
        store.append(
            f"{category}-{n}",
            [
                NewEvent(
                    "Deposited" if k % 3 else "Withdrawn",
                    {"amount": k * 7 % 1000, "currency": "EUR", "note": f"entry {k}"},
                    {"correlation_id": f"c-{n}", "user": "bench"},
                )
                for k in range(STREAM)
            ],
        )
        if n and n % 10_000 == 0:
            done = n * STREAM
            rate = done / (time.perf_counter() - started)
            print(f"  filled {done:,} events ({rate:,.0f}/s)", flush=True)


@contextmanager
def opened(backend: str, events: int, tmp: str) -> Iterator[EventStore]:
    if backend == "postgres":
        schema = f"bench_console_{events}"
        reset_schema(schema)
        url = f"{PG}?schema={schema}"
    else:
        url = f"sqlite:///{tmp}/console-{events}.db"
    try:
        with EventStore.open(url) as store:
            started = time.perf_counter()
            fill(store, events)
            print(
                f"{backend}: {events:,} events filled in {time.perf_counter() - started:.1f} s",
                flush=True,
            )
            yield store
    finally:
        if backend == "postgres":
            drop_schema(schema)


def pages(store: EventStore) -> dict[str, str]:
    head = store.high_water_mark()
    middle = head // 2
    stream = next(iter(store.read_all(after=middle, limit=1))).stream_id
    return {
        "Log": "/log",
        "Log ?category=transfer": "/log?category=transfer",
        "Log ?category=audit (rare)": "/log?category=audit",
        "Stream": f"/stream?id={stream}",
        "Event": f"/events/{middle}",
    }


class Served:
    """The console for `store`, served by uvicorn on a thread, and a connection to it."""

    def __init__(self, store: EventStore) -> None:
        import uvicorn

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        config = uvicorn.Config(
            create_app(store, App()), host="127.0.0.1", port=port, log_level="warning"
        )
        self.store = store
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start in 30 s"
            time.sleep(0.01)
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def get(self, path: str) -> tuple[int, bytes]:
        self.connection.request("GET", path)
        response = self.connection.getresponse()
        return response.status, response.read()

    def close(self) -> None:
        self.connection.close()
        self.server.should_exit = True
        self.thread.join(10)


def p95(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=20)[-1] * 1000


DOWNLOADS = {
    "download /log.ndjson": "/log.ndjson",
    "download, per event": "/log.ndjson?since=1970-01-01T00:00",
}


def downloads(clients: dict[int, tuple[Served, dict[str, str]]], runs: int) -> None:
    """The whole log downloaded, both ways, and exported: best of `runs` seconds each."""
    print(f"\nthe whole log, best of {runs} runs")
    names = "".join(f"{name:>24}" for name in DOWNLOADS)
    print(f"{'size':>12}{names}{'export':>12}   ratio")
    for size, (client, _) in clients.items():
        took = {}
        for name, url in DOWNLOADS.items():
            best = float("inf")
            for _ in range(runs):
                started = time.perf_counter()
                status, body = client.get(url)
                best = min(best, time.perf_counter() - started)
                assert status == 200, (url, body[:300])
            took[name] = best
        exported = float("inf")
        for _ in range(runs):
            with open(os.devnull, "wb") as sink:
                started = time.perf_counter()
                export_events(client.store, sink)
                exported = min(exported, time.perf_counter() - started)
        ratio = took["download /log.ndjson"] / exported
        cells = "".join(f"{took[name]:>22.2f} s" for name in DOWNLOADS)
        print(f"{size:>12,}{cells}{exported:>10.2f} s   {ratio:5.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", default="1000,100000", help="comma-separated log sizes")
    parser.add_argument("--backend", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--downloads", type=int, default=3, help="runs of each whole-log read")
    options = parser.parse_args()
    sizes = sorted(int(size) for size in options.events.split(","))
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        clients = {}
        stack = []
        for size in sizes:
            context = opened(options.backend, size, tmp)
            store = context.__enter__()
            stack.append(context)
            clients[size] = (Served(store), pages(store))
        samples: dict[tuple[int, str], list[float]] = {}
        for client, urls in clients.values():  # one round untimed: imports, caches, plans
            for url in urls.values():
                client.get(url)
        for _ in range(options.rounds):
            for size, (client, urls) in clients.items():
                for name, url in urls.items():
                    started = time.perf_counter()
                    status, body = client.get(url)
                    took = time.perf_counter() - started
                    assert status == 200, (url, body[:300])
                    samples.setdefault((size, name), []).append(took)
        reference = sizes[0]
        print(f"\np95 over {options.rounds} rounds, {options.backend}; goal {GOAL_MS:.0f} ms")
        header = f"{'page':<28}" + "".join(f"{size:>14,}" for size in sizes) + "   ratio"
        print(header)
        for name in clients[reference][1]:
            times = [p95(samples[(size, name)]) for size in sizes]
            ratio = times[-1] / times[0]
            cells = "".join(f"{t:>11.1f} ms" for t in times)
            verdict = "ok" if times[-1] < GOAL_MS else "OVER GOAL"
            print(f"{name:<28}{cells}   {ratio:5.2f}x  {verdict}")
        downloads(clients, options.downloads)
        for client, _ in clients.values():
            client.close()
        for context in reversed(stack):
            context.__exit__(None, None, None)


if __name__ == "__main__":
    main()
