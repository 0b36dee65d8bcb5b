"""Verify a store: what must hold of every log, checked in one pass over it.

- each stream's versions run 1..n without a gap or a repeat, but for the events
  retention removed: gaps with room at or below the store's low-water mark
  (`removed_by_retention`), no more versions in all than its runs removed;
- positions strictly increase;
- no event id appears twice;
- no snapshot is ahead of its stream;
- given the checkpoints of the log's readers, by name, none is past the
  high-water mark.

The pass keeps, per stream, its last version and position, and every id as a 128-bit int:
a million events take a few seconds and some 100 MB.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from .store import EventStore

MOST_LISTED = 1_000
"""Problems a verification lists; beyond these it only counts them."""

PROGRESS_EVERY = 10_000
"""Events between two reports to a progress callback."""

MARK_READ_EVERY = 1.0
"""Seconds at least between two reads of the low-water mark when a gap needs it."""


@dataclass(frozen=True)
class LogProblem:
    """Something `verify_log` found wrong.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent, verify_log

        with EventStore.open("sqlite:///shop.db") as store:
            store.append("order-1", [NewEvent("OrderPlaced", {"cents": 1250})])
            # A read model restored from a later backup than the store's: ahead of the log.
            report = verify_log(store, checkpoints=lambda: {"order-totals": 5})
        [problem] = report.problems
        assert (problem.kind, problem.where) == ("checkpoint ahead", "order-totals")
        assert problem.detail == "checkpoint at position 5, past the high-water mark 1"
    """

    kind: str
    """One of: version gap, version repeated, position order, duplicate id, snapshot
    ahead, checkpoint ahead."""
    where: str
    """The stream, position or checkpoint (by its name) it is about."""
    detail: str
    """What was found, in a sentence."""


@dataclass(frozen=True)
class LogVerification:
    """What `verify_log` read and found.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent, verify_log

        with EventStore.open("sqlite:///shop.db") as store:
            store.append("order-1", [NewEvent("OrderPlaced", {"cents": 1250})])
            store.save_snapshot("order-1", version=1, type="Order", data={"cents": 1250})
            verification = verify_log(store)
        assert verification.ok and verification.problem_count == 0
        assert (verification.events, verification.streams, verification.snapshots) == (1, 1, 1)
        assert verification.checkpoints is None  # none were asked for
    """

    events: int
    """Events read: the log up to the high-water mark taken when the pass began."""
    streams: int
    """Streams the events read belong to."""
    high_water_mark: int
    """The high-water mark the pass read up to, taken when it began."""
    low_water_mark: int
    """Where the log in the store begins to be whole, when the pass ended: 0 unless
    retention removed events at or below it (which are no gap)."""
    snapshots: int
    """Snapshots found and checked (streams that have one)."""
    checkpoints: int | None
    """Readers' checkpoints checked; None when none were asked for."""
    problems: list[LogProblem] = field(default_factory=list)
    """The first `MOST_LISTED` problems, in the order found."""
    problem_count: int = 0
    """Every problem found, listed or not."""

    @property
    def ok(self) -> bool:
        """Nothing was found wrong."""
        return self.problem_count == 0


def verify_log(
    store: EventStore,
    *,
    checkpoints: Callable[[], Mapping[str, int]] | None = None,
    progress: Callable[[int], None] | None = None,
) -> LogVerification:
    """Check the whole log (and the positions `checkpoints` gives, by name, once the log
    is read: each must be at most the high-water mark the pass read to).

    `progress` is told the position reached, now and then.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent, verify_log

        with EventStore.open("sqlite:///shop.db") as store:
            store.append("order-1", [NewEvent("OrderPlaced", {"cents": 1250})])
            store.append("order-2", [NewEvent("OrderPlaced", {"cents": 800})])
            report = verify_log(store, checkpoints=lambda: {"order-totals": 2})
        assert report.ok, report.problems
        assert (report.events, report.high_water_mark, report.checkpoints) == (2, 2, 1)
    """
    found: list[LogProblem] = []
    count = 0

    def problem(kind: str, where: str, detail: str) -> None:
        nonlocal count
        count += 1
        if len(found) < MOST_LISTED:
            found.append(LogProblem(kind, where, detail))

    high_water_mark = store.high_water_mark()
    low_water_mark = store.low_water_mark()
    mark_read_at = time.monotonic()

    retained_versions = 0

    def retained(missing: int, after: int, before: int) -> bool:
        """Whether a gap can be events retention removed (`removed_by_retention`), counted
        in `retained_versions` if so."""
        nonlocal low_water_mark, mark_read_at, retained_versions
        explained = removed_by_retention(missing, after=after, before=before, mark=low_water_mark)
        # A run that committed during the pass raised the mark, and the gap it made is met
        # after it committed: a read now sees the mark that explains it. At most once a
        # second, or a store with many real gaps would pay a query for each.
        if not explained and time.monotonic() - mark_read_at >= MARK_READ_EVERY:
            low_water_mark = store.low_water_mark()
            mark_read_at = time.monotonic()
            explained = removed_by_retention(
                missing, after=after, before=before, mark=low_water_mark
            )
        if explained:
            retained_versions += missing
        return explained

    streams: dict[str, tuple[int, int]] = {}
    """Each stream's last version, and its position."""
    ids: set[int] = set()
    last_position = 0
    events = 0
    for event in store.read_all():
        events += 1
        position = event.position
        if position <= last_position:
            problem(
                "position order",
                f"position {position}",
                f"comes after position {last_position} in the log",
            )
        last_position = position
        key = event.id.int
        if key in ids:
            problem(
                "duplicate id", f"position {position}", f"id {event.id} is held by an earlier event"
            )
        ids.add(key)
        stream_id = event.stream_id
        before, before_at = streams.get(stream_id, (0, 0))
        version = event.version
        if version <= before:
            problem(
                "version repeated",
                stream_id,
                f"version {version} (position {position}) comes after version {before}",
            )
        elif version > before + 1 and not retained(version - before - 1, before_at, position):
            missing = (
                f"version {before + 1}"
                if version == before + 2
                else f"versions {before + 1} to {version - 1}"
            )
            problem(
                "version gap",
                stream_id,
                f"version {version} (position {position}) follows version {before}: "
                f"{missing} missing",
            )
        if version > before:
            streams[stream_id] = (version, position)
        if progress is not None and events % PROGRESS_EVERY == 0:
            progress(position)
    if progress is not None:
        progress(max(last_position, high_water_mark))
    del ids
    low_water_mark = store.low_water_mark()
    if retained_versions:
        # Each gap taken as removed had room below the mark, but together they may need
        # more events than retention removed (a stream begun above the mark that lost its
        # first events): then some were lost, though which cannot be told. The runs are read
        # after the pass, so they count whatever it found removed.
        removed = sum(run.removed for run in store.retention.runs())
        if retained_versions > removed:
            problem(
                "version gap",
                f"at or below position {low_water_mark}",
                f"{retained_versions} versions of streams are missing where retention may "
                f"have removed them, but its runs removed {removed} events",
            )

    snapshots = 0
    for stream_id, (version, _) in streams.items():
        snapshot = store.load_snapshot(stream_id)
        if snapshot is None:
            continue
        snapshots += 1
        if snapshot.version > version:
            problem(
                "snapshot ahead",
                stream_id,
                f"a snapshot at version {snapshot.version}, the stream's last event is "
                f"version {version}",
            )

    checked = None
    if checkpoints is not None:
        positions = checkpoints()
        checked = len(positions)
        for name, position in positions.items():
            if position > high_water_mark:
                problem(
                    "checkpoint ahead",
                    name,
                    f"checkpoint at position {position}, past the high-water mark "
                    f"{high_water_mark}",
                )

    return LogVerification(
        events=events,
        streams=len(streams),
        high_water_mark=high_water_mark,
        low_water_mark=low_water_mark,
        snapshots=snapshots,
        checkpoints=checked,
        problems=found,
        problem_count=count,
    )


def removed_by_retention(missing: int, *, after: int, before: int, mark: int) -> bool:
    """Whether `missing` versions of a stream, between its events at positions `after` (0 for
    none) and `before`, can be events retention removed: all at or below the low-water
    `mark`, each at a position of its own.

    Retention removes only at or below the mark, so a gap with no room for it there is
    real. One with room is taken as removed: PostgreSQL's positions have holes, so the
    positions above the mark cannot say that none of the versions was lost there.
    """
    return missing <= min(mark, before - 1) - after
