"""Schema check and verify: `python -m benchmarks.schema [--sizes 1000000] [--types 200]`.

- `check`: a registry of `--types` event types (six fields each, one a nested model,
  one a list, one optional), a catalog committed from it, then today's registry with a
  tenth of the types bumped to version 2 with an upcaster and a tenth given a new field
  with a default: the time of `check_compatibility` (which also runs each upcaster on
  data made from the old schema) and of making the catalog, the median of the rounds.
  Goal: the check under a second.
- `verify`: a log of each size in `--sizes` (streams of 100 events of ten types, a
  fifth stored at version 1, a third at 2, the rest at 3, read through two upcasters),
  on each backend, timed round by round, interleaved, against two plain reads of the
  same log by the same store: `read_all` (every event built as a `RecordedEvent`) and
  `read_all_encoded` (the rows as stored). Printed: events/s and the ratio of the
  verify's time to `read_all`'s (goal: within 2x).
- `--spark-cores 1,2`: the same log verified as a Spark job (`verify_events`, local
  mode with that many cores, JDBC or SQLite read as `schema verify --spark` reads),
  beside the in-process verify's rate: the first run of each session warms the JVM and
  is not counted.

The logs are kept between runs (in schemas `bench_schema_<size>` and files under
`--folder`) unless `--fresh`.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from eventcraft.domain import (
    DomainEvent,
    EventCatalog,
    EventRegistry,
    check_compatibility,
    verify_stored_events,
)
from eventcraft.eventstore import EVENT_VERSION, EventStore, NewEvent
from pydantic import BaseModel

from .contenders import PG, reset_schema
from .record import Record

TYPES = 10
STREAM = 100


class Line(BaseModel):
    sku: str
    quantity: int


def _event_class(
    name: str, extra: dict[str, Any] | None = None, defaults: dict[str, Any] | None = None
) -> type[DomainEvent]:
    annotations: dict[str, Any] = {
        "order_id": str,
        "customer": str,
        "cents": int,
        "lines": list[Line],
        "note": str | None,
        "placed_at": str,
        **(extra or {}),
    }
    return type(
        name, (DomainEvent,), {"__annotations__": annotations, "note": None, **(defaults or {})}
    )


def check_registries(types: int) -> tuple[EventRegistry, EventRegistry]:
    """The committed registry, and today's: a tenth bumped, a tenth with a new field."""
    before, now = EventRegistry(), EventRegistry()
    for n in range(types):
        name = f"Event{n:03d}"
        before.register(_event_class(name), name)
        if n % 10 == 0:
            now.register(_event_class(name, {"currency": str}), name, version=2)
            now.upcaster(name, from_version=1)(lambda data: {**data, "currency": "EUR"})
        elif n % 10 == 1:
            now.register(_event_class(name, {"channel": str}, {"channel": "web"}), name)
        else:
            now.register(_event_class(name), name)
    return before, now


def verify_registry() -> EventRegistry:
    registry = EventRegistry()
    for n in range(TYPES):
        name = f"Type{n}"
        registry.register(_event_class(name, {"currency": str, "channel": str}), name, version=3)
        registry.upcaster(name, from_version=1)(lambda data: {**data, "currency": "EUR"})
        registry.upcaster(name, from_version=2)(lambda data: {**data, "channel": "web"})
    return registry


def _payload(n: int, version: int) -> dict[str, Any]:
    data: dict[str, Any] = {
        "order_id": f"o-{n}",
        "customer": f"customer-{n % 997}",
        "cents": n % 100_000,
        "lines": [{"sku": f"sku-{n % 50}", "quantity": 1 + n % 3}],
        "note": None if n % 4 else "gift",
        "placed_at": "2026-11-29T12:00:00+00:00",
    }
    if version >= 2:
        data["currency"] = "EUR"
    if version >= 3:
        data["channel"] = "shop"
    return data


def _version(n: int) -> int:
    bucket = n % 15
    return 1 if bucket < 3 else 2 if bucket < 8 else 3


def fill(url: str, events: int) -> None:
    with EventStore.open(url) as store:
        for start in range(0, events, STREAM):
            batch = []
            for n in range(start, min(start + STREAM, events)):
                version = _version(n)
                batch.append(
                    NewEvent(f"Type{n % TYPES}", _payload(n, version), {EVENT_VERSION: version})
                )
            store.append(f"order-{start // STREAM}", batch)


def _has_log(url: str, events: int) -> bool:
    try:
        with EventStore.open(url) as store:
            return store.high_water_mark() == events
    except Exception:  # no such store yet
        return False


def time_check(types: int, rounds: int) -> dict[str, float]:
    before, now = check_registries(types)
    committed = EventCatalog.of(before, aggregates=())
    checks, catalogs = [], []
    for _ in range(rounds):
        began = time.perf_counter()
        problems = check_compatibility(now, committed)
        checks.append(time.perf_counter() - began)
        began = time.perf_counter()
        EventCatalog.of(now, previous=committed, aggregates=())
        catalogs.append(time.perf_counter() - began)
    assert problems == [], problems  # every change in it is a compatible one
    return {
        "check_seconds": statistics.median(checks),
        "catalog_seconds": statistics.median(catalogs),
    }


def time_verify(url: str, events: int, rounds: int) -> dict[str, Any]:
    registry = verify_registry()

    def read_all(store: EventStore) -> int:
        return sum(1 for _ in store.read_all())

    def read_encoded(store: EventStore) -> int:
        return sum(1 for _ in store.read_all_encoded())

    def verify(store: EventStore) -> int:
        found = verify_stored_events(store, registry)
        assert found.ok, [c for c in found.counts if c.failed]
        return found.events

    sides: list[tuple[str, Callable[[EventStore], int]]] = [
        ("read_all", read_all),
        ("read_all_encoded", read_encoded),
        ("verify", verify),
    ]
    seconds: dict[str, list[float]] = {name: [] for name, _ in sides}
    ratios: list[float] = []
    with EventStore.open(url) as store:
        for r in range(rounds):
            took = {}
            for name, call in sides if r % 2 == 0 else sides[::-1]:
                began = time.perf_counter()
                counted = call(store)
                took[name] = time.perf_counter() - began
                assert counted == events, (name, counted)
                seconds[name].append(took[name])
            ratios.append(took["verify"] / took["read_all"])
    return {
        "events_per_second": {n: events / statistics.median(s) for n, s in seconds.items()},
        "verify_over_read_all": statistics.median(ratios),
        "ratios": ratios,
    }


def time_spark(url: str, events: int, cores: list[int], rounds: int) -> list[dict[str, Any]]:
    from eventcraft.projections.spark import spark_session, verify_events

    from .spark import settings

    registry = verify_registry()
    found = []
    for count in cores:
        spark = spark_session(f"local[{count}]", settings=settings(count))
        runs = []
        for _ in range(rounds + 1):  # the first warms the JVM
            began = time.perf_counter()
            counted = verify_events(spark, url, registry)
            runs.append(time.perf_counter() - began)
            assert sum(c.events for c in counted) == events
            assert not any(c.failed for c in counted)
        spark.stop()
        seconds = statistics.median(runs[1:])
        found.append({"cores": count, "seconds": seconds, "events_per_second": events / seconds})
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000000", help="log sizes, comma-separated")
    parser.add_argument("--backends", default="postgres,sqlite")
    parser.add_argument("--types", type=int, default=200, help="event types of the check")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--folder", type=Path, help="for the SQLite files (default: a temp dir)")
    parser.add_argument("--fresh", action="store_true", help="fill the logs again")
    parser.add_argument("--prefix", default="bench_schema", help="the logs' schema names")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the record here")
    parser.add_argument(
        "--spark-cores", default="", help="also verify in Spark with these local cores (1,2)"
    )
    args = parser.parse_args()
    backends = [b for b in args.backends.split(",") if b]
    record = Record("schema", args, postgres=PG if "postgres" in backends else "")

    checked = time_check(args.types, max(args.rounds, 3))
    goal = "met" if checked["check_seconds"] < 1 else "MISSED"
    print(
        f"check, {args.types} types: {checked['check_seconds'] * 1000:.0f} ms (goal < 1 s: "
        f"{goal}); the catalog made in {checked['catalog_seconds'] * 1000:.0f} ms",
        flush=True,
    )

    results: dict[str, Any] = {"check": {"types": args.types, **checked}, "verify": []}
    folder = args.folder or Path(tempfile.mkdtemp(prefix="bench-schema-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(
        f"\n{'backend':<9} {'events':>11} {'read_all ev/s':>14} {'encoded ev/s':>13} "
        f"{'verify ev/s':>12} {'verify / read_all':>18} {'goal 2x':>8}"
    )
    for size in (int(s) for s in args.sizes.split(",") if s):
        for backend in backends:
            if backend == "postgres":
                schema = f"{args.prefix}_{size}"
                url = f"{PG}?schema={schema}"
                if args.fresh or not _has_log(url, size):
                    reset_schema(schema)
                    fill(url, size)
            else:
                url = f"sqlite:///{folder / f'{args.prefix}_{size}.db'}"
                if args.fresh or not _has_log(url, size):
                    Path(url.removeprefix("sqlite:///")).unlink(missing_ok=True)
                    fill(url, size)
            timed = time_verify(url, size, args.rounds)
            rates = timed["events_per_second"]
            ratio = timed["verify_over_read_all"]
            print(
                f"{backend:<9} {size:>11,} {rates['read_all']:>14,.0f} "
                f"{rates['read_all_encoded']:>13,.0f} {rates['verify']:>12,.0f} "
                f"{ratio:>17.2f}x {'met' if ratio <= 2 else 'MISSED':>8}",
                flush=True,
            )
            cores = [int(c) for c in args.spark_cores.split(",") if c]
            if cores:
                timed["spark"] = time_spark(url, size, cores, args.rounds)
                for run in timed["spark"]:
                    print(
                        f"{'':<9} {'':>11} Spark local[{run['cores']}]: "
                        f"{run['events_per_second']:,.0f} ev/s "
                        f"({run['events_per_second'] / rates['verify']:.2f}x the in-process "
                        "verify)",
                        flush=True,
                    )
            results["verify"].append({"backend": backend, "events": size, **timed})
    if args.json:
        record.write(args.json, results)


if __name__ == "__main__":
    try:
        main()
    except psycopg.OperationalError as error:
        raise SystemExit(f"PostgreSQL is not reachable at {PG}: {error}") from None
