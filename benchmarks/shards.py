"""A log past one primary, simulated: what a merged read of many shards costs, and what
order it keeps. `python -m benchmarks.shards [--shards 10,100] [--json PATH]`.

No database runs here: this is a discrete-event model of the plan in the documentation
(Explanation, "Past one primary"), to measure what that plan claims before it is built.
Streams are spread over N shards by hash; each shard is a store of its own with its own
gap-free positions, and stamps each commit with its clock (a hybrid timestamp: never
below the shard's last stamp), clocks being off true time by up to `--skew` ms. A reader
asks every shard for what is new every `--poll` ms (each shard at its own phase, each
answer `--network` ms late at most; with `--slow`, one shard answers that much later
still), and three readers are compared:

- **per shard** (no global order): each shard's events as its poll brings them, the
  reader keeping one checkpoint per shard. Order holds within a shard, and so within a
  stream; nothing is promised across shards.
- **merged by watermark**: an event is given out once every shard has said it holds
  nothing older (its watermark: its clock at the poll, less the commit-to-visible bound
  `--visible`), in (stamp, shard, position) order. The order is total and the same for
  every reader; two events committed more than twice the skew apart come in commit order.
- **merged naively**: each poll's events given out at once, by stamp: what a reader gets
  without watermarks. Counted: events given out after one with a later stamp.

Printed per shard count: the latency from commit to a reader (p50, p99, max), the order
broken (stamps out of order; commits given out of commit order, at all and more than 2 x
skew apart),
and the reader's queries per second (N shards / poll interval), the cost of the merge.
"""

from __future__ import annotations

import argparse
import heapq
import random
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .record import Record


@dataclass(frozen=True, slots=True)
class Model:
    """The simulated system: every time in seconds."""

    shards: int
    rate: float = 10_000.0
    """Events appended per second, over all shards."""
    seconds: float = 5.0
    skew: float = 0.001
    """Each shard's clock is off true time by a fixed amount within +-skew."""
    visible: float = 0.002
    """An event becomes visible on its shard within this of its commit."""
    poll: float = 0.010
    network: float = 0.001
    slow: float = 0.0
    """How much later than the others shard 0 answers (a loaded or distant server)."""
    seed: int = 7


@dataclass(frozen=True, slots=True)
class Event:
    commit: float
    """True time of its commit."""
    stamp: float
    """Its shard's hybrid timestamp."""
    shard: int
    position: int
    visible: float


def events_of(model: Model, skews: list[float]) -> list[Event]:
    """A Poisson stream of appends, each to a shard by its stream's hash (uniform)."""
    draw = random.Random(model.seed + 2)
    last_stamp = [float("-inf")] * model.shards
    positions = [0] * model.shards
    events: list[Event] = []
    now = 0.0
    while True:
        now += draw.expovariate(model.rate)
        if now >= model.seconds:
            return events
        shard = draw.randrange(model.shards)
        # A hybrid stamp: the shard's clock, but never at or below its last stamp.
        stamp = max(now + skews[shard], last_stamp[shard] + 1e-9)
        last_stamp[shard] = stamp
        positions[shard] += 1
        visible = now + draw.uniform(0, model.visible)
        events.append(Event(now, stamp, shard, positions[shard], visible))


def simulate(model: Model) -> dict[str, Any]:
    """Run the three readers over one run of appends; their latencies and order broken."""
    shard_skew = _skews(model)
    events = events_of(model, shard_skew)
    draw = random.Random(model.seed + 1)
    by_shard: list[list[Event]] = [[] for _ in range(model.shards)]
    for event in events:
        by_shard[event.shard].append(event)
    for queue in by_shard:
        queue.sort(key=lambda e: e.visible)  # what a poll finds: the visible ones
    taken = [0] * model.shards

    # Each shard's polls, at a phase of its own: (time the answer arrives, shard, asked at).
    polls: list[tuple[float, int, float]] = []
    for shard in range(model.shards):
        asked = draw.uniform(0, model.poll)
        while asked < model.seconds + 4 * model.poll:
            late = model.slow if shard == 0 else 0.0
            polls.append((asked + late + draw.uniform(0, model.network), shard, asked))
            asked += model.poll
    polls.sort()

    known = [float("-inf")] * model.shards  # each shard's last watermark the reader has
    lowest: list[tuple[float, int]] = [(w, s) for s, w in enumerate(known)]
    heapq.heapify(lowest)
    pending: list[tuple[float, int, int, float]] = []  # (stamp, shard, position, commit)
    per_shard_latency: list[float] = []
    merged_latency: list[float] = []
    merged_commits: list[float] = []
    naive_stamps: list[float] = []
    merged_stamps: list[float] = []
    for arrived, shard, asked in polls:
        queue = by_shard[shard]
        found = []
        while taken[shard] < len(queue) and queue[taken[shard]].visible <= asked:
            found.append(queue[taken[shard]])
            taken[shard] += 1
        for event in found:
            per_shard_latency.append(arrived - event.commit)
            heapq.heappush(pending, (event.stamp, event.shard, event.position, event.commit))
        naive_stamps.extend(sorted(e.stamp for e in found))
        # Whatever commits on the shard from now on is stamped at or after its clock now,
        # and what committed before is visible within `visible`: nothing older can come.
        known[shard] = asked + shard_skew[shard] - model.visible
        heapq.heappush(lowest, (known[shard], shard))
        while lowest[0][0] != known[lowest[0][1]]:
            heapq.heappop(lowest)  # a shard's older watermark, since passed
        watermark = lowest[0][0]
        while pending and pending[0][0] <= watermark:
            stamp, _, _, commit = heapq.heappop(pending)
            merged_latency.append(arrived - commit)
            merged_commits.append(commit)
            merged_stamps.append(stamp)
    return {
        "shards": model.shards,
        "events": len(events),
        "given_out": len(merged_latency),
        "per_shard": _latencies(per_shard_latency),
        "merged": _latencies(merged_latency),
        "merged_stamps_out_of_order": _out_of_order(merged_stamps),
        "naive_stamps_out_of_order": _out_of_order(naive_stamps),
        "merged_commits_out_of_order": _late_commits(merged_commits, 0.0),
        "merged_commits_out_of_order_beyond_2_skew": _late_commits(merged_commits, 2 * model.skew),
        "queries_per_second": model.shards / model.poll,
    }


def _skews(model: Model) -> list[float]:
    """Each shard's clock: off true time by a fixed amount within +-skew."""
    draw = random.Random(model.seed)
    return [draw.uniform(-model.skew, model.skew) for _ in range(model.shards)]


def _latencies(seconds: list[float]) -> dict[str, float]:
    if not seconds:
        return {"p50_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0}
    cuts = statistics.quantiles(seconds, n=100, method="inclusive")
    return {"p50_ms": cuts[49] * 1000, "p99_ms": cuts[98] * 1000, "max_ms": max(seconds) * 1000}


def _out_of_order(stamps: list[float]) -> int:
    """Events given out after one with a later stamp."""
    latest, broken = float("-inf"), 0
    for stamp in stamps:
        if stamp < latest:
            broken += 1
        latest = max(latest, stamp)
    return broken


def _late_commits(commits: list[float], margin: float) -> int:
    """Events given out after one that committed more than `margin` later."""
    latest, broken = float("-inf"), 0
    for commit in commits:
        if commit < latest - margin:
            broken += 1
        latest = max(latest, commit)
    return broken


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", default="10,100", help="shard counts, comma-separated")
    parser.add_argument("--rate", type=float, default=10_000.0, help="appends per second")
    parser.add_argument("--seconds", type=float, default=5.0, help="simulated time")
    parser.add_argument("--skew", type=float, default=1.0, help="clock skew bound, ms")
    parser.add_argument("--visible", type=float, default=2.0, help="commit to visible, ms")
    parser.add_argument("--poll", type=float, default=10.0, help="poll interval, ms")
    parser.add_argument("--network", type=float, default=1.0, help="answer delay bound, ms")
    parser.add_argument(
        "--slow", type=float, default=0.0, help="how much later one shard answers, ms"
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the record here")
    args = parser.parse_args()
    record = Record("shards", args)
    print(
        f"{'shards':>6} {'events':>8} | {'per shard p50/p99 ms':>21} | "
        f"{'merged p50/p99/max ms':>22} | {'stamps out of order':>19} "
        f"{'(naive)':>8} | {'commits out of order':>20} {'> 2 skew apart':>14} | "
        f"{'queries/s':>9}"
    )
    results = []
    for shards in (int(n) for n in args.shards.split(",") if n):
        model = Model(
            shards,
            rate=args.rate,
            seconds=args.seconds,
            skew=args.skew / 1000,
            visible=args.visible / 1000,
            poll=args.poll / 1000,
            network=args.network / 1000,
            slow=args.slow / 1000,
        )
        found = simulate(model)
        assert found["given_out"] == found["events"], "the merge held events back for good"
        one, merged = found["per_shard"], found["merged"]
        print(
            f"{shards:>6} {found['events']:>8,} | "
            f"{one['p50_ms']:>10.1f} / {one['p99_ms']:>8.1f} | "
            f"{merged['p50_ms']:>6.1f} / {merged['p99_ms']:>6.1f} / {merged['max_ms']:>6.1f} | "
            f"{found['merged_stamps_out_of_order']:>19,} "
            f"{found['naive_stamps_out_of_order']:>8,} | "
            f"{found['merged_commits_out_of_order']:>20,} "
            f"{found['merged_commits_out_of_order_beyond_2_skew']:>14,} | "
            f"{found['queries_per_second']:>9,.0f}",
            flush=True,
        )
        results.append(found)
    if args.json:
        record.write(args.json, {"runs": results})


if __name__ == "__main__":
    main()
