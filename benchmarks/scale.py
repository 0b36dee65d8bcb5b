"""The store at scale (issue 26): `python -m benchmarks.scale [--sizes 10000,100000,...]`.

Grows the same log in eventcraft and in a plain table (`scale_contenders.py`)
side by side, on PostgreSQL and on SQLite (up to `--sqlite-up-to` events), in
alternating slices of streams, and at each size times both sides in turn,
round by round:

- single append: one event to an existing stream, one transaction (p50, p99);
- batch: a new stream of 100 events in one transaction (events/s);
- stream load: a whole 100-event stream, read and decoded;
- global page: the 1,000 events of the log after a random position;
- category page: the next 1,000 events of a 1% category after a random
  position, on our store (the plain table has no categories), beside a
  global page of the same length on each side;
- bytes per event: the tables and their indexes on disk over the events held.

Once grown, PostgreSQL's tables are analyzed, as autovacuum would in time: on
a freshly filled table it may not have yet, and the plain table's stream read
then took a parallel scan (79 ms at 10M events, against 2 ms for ours, whose
paged query has a LIMIT).

Every ratio is ours over the plain table's, in time (for a rate, the plain
table's rate over ours) or in bytes: 1.5x is half as much again. A metric's
ratio is the median of its rounds' ratios, so a round slowed by another
tenant of the machine, which slows both sides, does not tip it.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .contenders import PG
from .record import Record
from .scale_contenders import PAGE, RARE, STREAM_LENGTH, Side, batch, open_sides, stream_name

SLICE = 10
"""Streams each side appends in turn while the logs grow."""

BACKENDS = ("postgresql", "sqlite")
GOALS = {
    "batch of 100": {"postgresql": 1.5, "sqlite": 2.0},
    "global page": {"postgresql": 1.5, "sqlite": 1.5},
    "category page / global": {"postgresql": 2.0, "sqlite": 2.0},
    "bytes per event": {"postgresql": 1.25, "sqlite": 1.25},
}
"""Issue 26's goals for a metric's ratio, at every size; the others only stay flat."""


@dataclass
class Counts:
    """What a run asks of each side at each size, in each round."""

    rounds: int = 3
    singles: int = 100
    batches: int = 10
    loads: int = 30
    pages: int = 10


@dataclass
class Samples:
    """Seconds per operation, by metric, side and round."""

    times: dict[tuple[str, str], dict[int, list[float]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list))
    )

    def add(self, metric: str, side: str, round: int, seconds: float) -> None:
        self.times[metric, side][round].append(seconds)

    def all(self, metric: str, side: str) -> list[float]:
        return [s for found in self.times[metric, side].values() for s in found]

    def median(self, metric: str, side: str) -> float:
        return statistics.median(self.all(metric, side))

    def p99(self, metric: str, side: str) -> float:
        found = sorted(self.all(metric, side))
        return found[min(len(found) - 1, round(0.99 * (len(found) - 1)))]

    def ratio(self, metric: str, side: str, reference: str, reference_metric: str = "") -> float:
        """The median over rounds of `side`'s median time over `reference`'s in that round."""
        ours = self.times[metric, side]
        theirs = self.times[reference_metric or metric, reference]
        return statistics.median(
            statistics.median(ours[r]) / statistics.median(theirs[r]) for r in ours if r in theirs
        )


@dataclass
class Grown:
    """One backend's two sides and how far their logs have grown."""

    backend: str
    ours: Side
    plain: Side
    streams: int = 0
    events: int = 0
    versions: dict[str, dict[int, int]] = field(default_factory=dict)
    load_seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))

    def sides(self, round: int) -> list[Side]:
        return [self.ours, self.plain] if round % 2 == 0 else [self.plain, self.ours]

    def grow(self, size: int) -> dict[str, float]:
        """Append streams to both sides until they hold `size` events; their events/s."""
        target = max(self.streams, size // STREAM_LENGTH)
        events = batch(STREAM_LENGTH)
        seconds: dict[str, float] = defaultdict(float)
        added = 0
        while self.streams < target:
            names = [stream_name(n) for n in range(self.streams, min(target, self.streams + SLICE))]
            for side in self.sides(self.streams // SLICE):
                started = time.perf_counter()
                for name in names:
                    side.append_stream(name, events)
                seconds[side.name] += time.perf_counter() - started
            self.streams += len(names)
            self.events += len(names) * STREAM_LENGTH
            added += len(names) * STREAM_LENGTH
        self.ours.settle()
        self.plain.settle()
        return {name: added / spent for name, spent in seconds.items() if spent}


def measure(grown: Grown, counts: Counts, rng: random.Random) -> Samples:
    """Every metric of both sides at the log's present size, side by side, round by round."""
    samples = Samples()
    events = batch(STREAM_LENGTH)
    for r in range(counts.rounds):
        singles = [rng.randrange(grown.streams) for _ in range(counts.singles)]
        batches = [stream_name(grown.streams + n) for n in range(counts.batches)]
        loads = [stream_name(rng.randrange(grown.streams)) for _ in range(counts.loads)]
        pages = [rng.randrange(max(1, grown.events - PAGE)) for _ in range(counts.pages)]
        spread = grown.events - 100 * PAGE  # a 1% category's page spans 100 pages of the log
        rare_pages = [rng.randrange(max(1, spread)) for _ in range(counts.pages)]
        # Ours first: how many events each category page brings sets the length
        # of the global pages they are held against.
        rare_lengths = []
        for after in rare_pages:
            started = time.perf_counter()
            rare_lengths.append(grown.ours.category_page(RARE, after))
            samples.add("category page", grown.ours.name, r, time.perf_counter() - started)
        for side in grown.sides(r):
            versions = grown.versions.setdefault(side.name, {})
            for n in singles:
                version = versions.get(n, STREAM_LENGTH) + 1
                samples.add(
                    "single append",
                    side.name,
                    r,
                    _timed(side.append_one)(stream_name(n), version, {"amount_cents": version}),
                )
                versions[n] = version
            for name in batches:
                samples.add("batch of 100", side.name, r, _timed(side.append_stream)(name, events))
            for name in loads:
                samples.add("stream load", side.name, r, _timed(side.load_stream)(name))
            for after in pages:
                samples.add("global page", side.name, r, _timed(side.global_page)(after))
            for after, length in zip(rare_pages, rare_lengths, strict=True):
                spent = _timed(side.global_page)(after, length)
                samples.add("global page, same length", side.name, r, spent)
        grown.streams += counts.batches
        grown.events += counts.batches * STREAM_LENGTH + counts.singles
    return samples


def _timed(call: Callable[..., object]) -> Callable[..., float]:
    def timed(*args: object) -> float:
        started = time.perf_counter()
        call(*args)
        return time.perf_counter() - started

    return timed


UNITS = {"ms": "{:.2f} ms", "events/s": "{:,.0f} ev/s", "bytes/event": "{:,.0f}"}
"""How a figure of each unit is printed."""


@dataclass
class Row:
    """One metric at one size: our figure, the plain table's (`reference` says whose, when
    not the plain table's), in `unit`, and the ratio."""

    metric: str
    ours: float
    plain: float
    unit: str
    ratio: float
    reference: str = ""

    @property
    def ours_text(self) -> str:
        return UNITS[self.unit].format(self.ours)

    @property
    def plain_text(self) -> str:
        text = UNITS[self.unit].format(self.plain)
        return f"{text} ({self.reference})" if self.reference else text

    def as_json(self, backend: str) -> dict[str, object]:
        """The row in the JSON record: both figures, whose the second is, ratio and goal."""
        return {
            "metric": self.metric,
            "unit": self.unit,
            "eventcraft": self.ours,
            "reference": self.plain,
            "reference_side": "eventcraft" if self.reference else "plain table",
            "ratio": self.ratio,
            "goal": GOALS.get(self.metric, {}).get(backend),
        }


@dataclass
class AtSize:
    """A backend's figures at one size, and how long its logs took to grow to it."""

    rows: list[Row]
    events: int
    grown_seconds: float


def rows(grown: Grown, samples: Samples, loaded: dict[str, float]) -> list[Row]:
    ours, plain = grown.ours.name, grown.plain.name

    def ms(metric: str, side: str) -> float:
        return 1000 * samples.median(metric, side)

    found = [
        Row(
            "single append p50",
            ms("single append", ours),
            ms("single append", plain),
            "ms",
            samples.ratio("single append", ours, plain),
        ),
        Row(
            "single append p99",
            1000 * samples.p99("single append", ours),
            1000 * samples.p99("single append", plain),
            "ms",
            samples.p99("single append", ours) / samples.p99("single append", plain),
        ),
        Row(
            "batch of 100",
            STREAM_LENGTH / samples.median("batch of 100", ours),
            STREAM_LENGTH / samples.median("batch of 100", plain),
            "events/s",
            samples.ratio("batch of 100", ours, plain),
        ),
    ]
    for metric in ("stream load", "global page"):
        found.append(
            Row(
                metric,
                ms(metric, ours),
                ms(metric, plain),
                "ms",
                samples.ratio(metric, ours, plain),
            )
        )
    found += [
        Row(
            "category page",
            ms("category page", ours),
            ms("global page, same length", plain),
            "ms",
            samples.ratio("category page", ours, plain, "global page, same length"),
        ),
        Row(
            "category page / global",
            ms("category page", ours),
            ms("global page, same length", ours),
            "ms",
            samples.ratio("category page", ours, ours, "global page, same length"),
            reference="ours",
        ),
    ]
    ours_bytes, plain_bytes = grown.ours.size_bytes(), grown.plain.size_bytes()
    found.append(
        Row(
            "bytes per event",
            ours_bytes / grown.events,
            plain_bytes / grown.events,
            "bytes/event",
            ours_bytes / plain_bytes,
        )
    )
    if loaded.get(ours) and loaded.get(plain):
        found.append(
            Row(
                "load, 100-event streams",
                loaded[ours],
                loaded[plain],
                "events/s",
                loaded[plain] / loaded[ours],
            )
        )
    return found


def print_size(backend: str, size: int, found: list[Row]) -> None:
    print(f"\n{backend}, {size:,} events: eventcraft | plain table | ratio (goal)", flush=True)
    for row in found:
        goal = GOALS.get(row.metric, {}).get(backend)
        mark = (
            "" if goal is None else f" (goal {goal}x: {'met' if row.ratio <= goal else 'NOT met'})"
        )
        ours, plain = row.ours_text, row.plain_text
        print(f"  {row.metric:<26} {ours:>14} | {plain:>22} | {row.ratio:.2f}x{mark}")


def growth(by_size: dict[int, list[Row]]) -> dict[str, float]:
    """Each metric's ratio at the largest size over its ratio at the smallest."""
    sizes = list(by_size)
    return {
        row.metric: [by_size[s][n] for s in sizes if n < len(by_size[s])][-1].ratio / row.ratio
        for n, row in enumerate(by_size[sizes[0]])
    }


def print_summary(backend: str, by_size: dict[int, list[Row]]) -> None:
    """A markdown table: each metric's figure and ratio at each size, and how the ratio grew."""
    sizes = list(by_size)
    print(f"\n{backend}: ours (ratio to the plain table)\n")
    print("| metric | " + " | ".join(f"{s:,}" for s in sizes) + " | goal | growth |")
    print("|---" * (len(sizes) + 3) + "|")
    grew = growth(by_size)
    for n, row in enumerate(by_size[sizes[0]]):
        cells = [by_size[s][n] for s in sizes if n < len(by_size[s])]
        goal = GOALS.get(row.metric, {}).get(backend)
        print(
            f"| {row.metric} | "
            + " | ".join(f"{c.ours_text} ({c.ratio:.2f}x)" for c in cells)
            + f" | {'' if goal is None else f'{goal}x'} | {grew[row.metric]:.2f} |"
        )


def run(
    backends: Sequence[str],
    sizes: Sequence[int],
    sqlite_up_to: int,
    counts: Counts,
    prefix: str = "bench_scale",
    folder: Path | None = None,
    server: str = PG,
) -> dict[str, dict[int, AtSize]]:
    """Grow and measure each backend's logs through `sizes`; the figures by backend and size."""
    rng = random.Random(26)
    with tempfile.TemporaryDirectory() as scratch:
        where = folder or Path(scratch)
        grown = [Grown(b, *open_sides(b, prefix, where, server)) for b in backends]
        results: dict[str, dict[int, AtSize]] = {b: {} for b in backends}
        try:
            for size in sorted(sizes):
                for one in grown:
                    if one.backend == "sqlite" and size > sqlite_up_to:
                        continue
                    started = time.perf_counter()
                    loaded = one.grow(size)
                    took, events = time.perf_counter() - started, one.events
                    print(f"{one.backend}: grown to {events:,} events in {took:.0f} s", flush=True)
                    found = rows(one, measure(one, counts, rng), loaded)
                    results[one.backend][size] = AtSize(found, events, took)
                    print_size(one.backend, size, found)
        finally:
            for one in grown:
                one.ours.close()
                one.plain.close()
    for backend, by_size in results.items():
        if by_size:
            print_summary(backend, {size: at.rows for size, at in by_size.items()})
    return results


def as_json(results: dict[str, dict[int, AtSize]]) -> dict[str, object]:
    """The `results` of the JSON record: by backend, each size's figures and each
    metric's growth (its ratio at the largest size over its ratio at the smallest)."""
    return {
        backend: {
            "sizes": [
                {
                    "size": size,
                    "events": at.events,
                    "grown_seconds": at.grown_seconds,
                    "metrics": [row.as_json(backend) for row in at.rows],
                }
                for size, at in by_size.items()
            ],
            "growth": growth({size: at.rows for size, at in by_size.items()}),
        }
        for backend, by_size in results.items()
        if by_size
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="10000,100000,1000000,10000000")
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--sqlite-up-to", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=Counts.rounds)
    parser.add_argument("--singles", type=int, default=Counts.singles, help="a round, a side")
    parser.add_argument("--batches", type=int, default=Counts.batches, help="a round, a side")
    parser.add_argument("--loads", type=int, default=Counts.loads, help="a round, a side")
    parser.add_argument("--pages", type=int, default=Counts.pages, help="a round, a side")
    parser.add_argument("--folder", type=Path, help="for the SQLite files (default: a temp dir)")
    parser.add_argument("--prefix", default="bench_scale", help="of the schemas (or files)")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args()
    backends = [b for b in args.backends.split(",") if b]
    unknown = set(backends) - set(BACKENDS)
    if unknown:
        parser.error(f"unknown backends {sorted(unknown)}; choose among {list(BACKENDS)}")
    counts = Counts(args.rounds, args.singles, args.batches, args.loads, args.pages)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    record = Record("scale", args, postgres=PG if "postgresql" in backends else "")
    results = run(backends, sizes, args.sqlite_up_to, counts, args.prefix, args.folder)
    if args.json:
        record.write(args.json, as_json(results))


if __name__ == "__main__":
    main()
