"""Retention: events leave the store only through it, archived first, positions kept.

A store grows for ever unless old events go. Policies say which may, per
category (older than `max_age`, or all but a stream's newest `max_count`)
and per stream (`Truncation`: its versions before one); a run removes them
up to a position `up_to` in one transaction, and records what it did. The
caller (`eventcraft.operations.retention`) first extends the Parquet
archive with the whole log up to `up_to`, removed events and kept ones, so
that the archive up to the store's `low_water_mark()` followed by the store
after it is the whole log: rebuilds and replays read it that way and give
what they gave before, and so do the reads of a store opened with `archive=`
(`archive_reads.py`). Every run also removes the events of deleted streams
(`deletion.py`, soft or tombstoned) up to `up_to`: the rule `DELETED_RULE`.

The global log's rules hold across it. Positions are never reused: a
stream's newest event is never removed (a stream keeps its version, and the
log's head is always some stream's newest event). Below the low-water mark
the store may have holes, which the mark explains; above it, none. The
database goes on refusing UPDATE and DELETE of events for everything but a
run: PostgreSQL's delete trigger lets a statement through only in a
transaction that set `eventcraft.retention` (which a run does), SQLite's
only while a run's marker row exists (inside its own transaction).

One run at a time per store: a run holds the store's lock (`Retention.exclusive`)
from its plan until its removal has committed, whichever archive folder it writes.
Two runs into two folders would both archive and both remove, and the runs table
would then name, as the archive of the highest mark, a folder that lacks what the
other run removed.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta

from .encoding import check_name, check_position
from .errors import ArchiveUnreadable, InvalidEvent

RETENTION_EXTRA = "eventcraft[retention]"
"""The extra that brings pyarrow, which writes the archive and reads it below the mark."""


@dataclass(frozen=True)
class RetentionPolicy:
    """Which events of one category may go: older than `max_age`, or all but each
    stream's newest `max_count` (either, or both: an event goes if either says so).

    Example::

        from datetime import timedelta

        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.eventstore.retention import RetentionPolicy

        # What `eventcraft retention plan --keep cart:age=30d,count=1` counts: a cart's
        # events older than 30 days, and all but each cart's newest.
        carts = RetentionPolicy("cart", max_age=timedelta(days=30), max_count=1)
        with EventStore.open("sqlite:///shop.db") as store:
            for n in range(3):
                store.append("cart-7", [NewEvent("ItemAdded", {"n": n})])
            head, now = store.high_water_mark(), store.now()
            cart_events, _ = store.retention.count([carts], [], up_to=head, now=now)
        assert cart_events == 2  # the newest stays
    """

    category: str
    max_age: timedelta | None = None
    max_count: int | None = None

    def __post_init__(self) -> None:
        check_name("category", self.category)
        if self.max_age is None and self.max_count is None:
            raise InvalidEvent(f"policy for {self.category!r}: give max_age, max_count or both")
        if self.max_age is not None and (
            not isinstance(self.max_age, timedelta) or self.max_age <= timedelta(0)
        ):
            raise InvalidEvent(f"max_age must be a positive timedelta, not {self.max_age!r}")
        if self.max_count is not None and (
            isinstance(self.max_count, bool)
            or not isinstance(self.max_count, int)
            or self.max_count < 1
        ):
            raise InvalidEvent(f"max_count must be an int of at least 1, not {self.max_count!r}")


@dataclass(frozen=True)
class Truncation:
    """One stream's events before `before_version` may go.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.eventstore.retention import Truncation

        with EventStore.open("sqlite:///shop.db") as store:
            for n in range(5):
                store.append("sensor-1", [NewEvent("Measured", {"celsius": 20 + n})])
            # A snapshot holds the state at version 4: the versions before it may go.
            cut = Truncation("sensor-1", before_version=4)
            head, now = store.high_water_mark(), store.now()
            removable, _ = store.retention.count([], [cut], up_to=head, now=now)
        assert removable == 3
    """

    stream_id: str
    before_version: int

    def __post_init__(self) -> None:
        check_name("stream id", self.stream_id)
        check_position("before_version", self.before_version)


@dataclass(frozen=True)
class RetentionRun:
    """What one run did, as the store records it.

    Example::

        import subprocess
        import sys

        from eventcraft.eventstore import EventStore, NewEvent

        with EventStore.open("sqlite:///shop.db") as store:
            for n in range(3):
                store.append("cart-7", [NewEvent("ItemAdded", {"n": n})])
        # A run (here the command line's) archives the log up to its mark in Parquet
        # files (the `retention` extra: pyarrow), then removes what its rules name.
        eventcraft = [sys.executable, "-m", "eventcraft", "--store", "sqlite:///shop.db"]
        run = ["retention", "apply", "--archive", "archive", "--keep", "cart:count=1", "--yes"]
        subprocess.run([*eventcraft, *run], check=True, capture_output=True)
        with EventStore.open("sqlite:///shop.db") as store:
            (done,) = store.retention.runs()
        assert (done.up_to, done.removed) == (3, 2)
        assert done.rules == "cart: beyond the newest 1 of a stream"
    """

    run: int
    up_to: int
    """The low-water mark it set: every event at or below it is in the archive."""
    removed: int
    """Events it removed from the store."""
    archive: str
    """Where the archive is: what rebuilds, and a store opened with `archive=True`, read
    below the mark."""
    rules: str
    """Its policies and truncations, as text."""
    finished_at: datetime


DELETED_RULE = "deleted streams: all but each one's newest event"
"""The rule every run applies besides its own: a deleted stream's events go, but its newest,
which stays hidden so that its versions (and SQLite's positions) go on from it.

Example::

    from eventcraft.eventstore import EventStore, NewEvent
    from eventcraft.eventstore.retention import DELETED_RULE, RetentionPolicy

    with EventStore.open("sqlite:///shop.db") as store:
        store.append("cart-7", [NewEvent("ItemAdded", {}), NewEvent("ItemAdded", {})])
        store.delete_stream("cart-7")  # its events stay in the log until a run
        rules = [RetentionPolicy("order", max_count=100)]
        head, now = store.high_water_mark(), store.now()
        counts = store.retention.count(rules, [], up_to=head, now=now)
    plan = dict(zip(["order: beyond the newest 100", DELETED_RULE], counts, strict=True))
    assert plan[DELETED_RULE] == 1  # all of cart-7 but its newest event
"""


_AGE_UNITS = (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1))


def age_text(age: timedelta) -> str:
    """`age` as a person writes it (`--keep order:age=90d`): in its largest whole unit."""
    if age % timedelta(seconds=1):
        return str(age)  # a fraction of a second: only from the Python API
    seconds = age // timedelta(seconds=1)
    unit, size = next((u, n) for u, n in _AGE_UNITS if seconds % n == 0)
    return f"{seconds // size}{unit}"


def rules_text(
    policies: Sequence[RetentionPolicy], truncations: Sequence[Truncation], deleted: int = 0
) -> str:
    """The rules of a run as one line of text, for its record and for people; with
    `DELETED_RULE` when the run removed `deleted` events of deleted streams."""
    parts = []
    for policy in policies:
        limits = []
        if policy.max_age is not None:
            limits.append(f"older than {age_text(policy.max_age)}")
        if policy.max_count is not None:
            limits.append(f"beyond the newest {policy.max_count} of a stream")
        parts.append(f"{policy.category}: {' or '.join(limits)}")
    parts += [f"{t.stream_id}: before version {t.before_version}" for t in truncations]
    if deleted:
        parts.append(DELETED_RULE)
    return "; ".join(parts)


class Retention(abc.ABC):
    """A store's retention: its low-water mark, its runs, and removing events by rules.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.eventstore.retention import Retention


        def health(store: EventStore) -> str:
            retention: Retention = store.retention
            runs = retention.runs()
            last = f"last run {runs[-1].finished_at:%Y-%m-%d}" if runs else "no run yet"
            return f"the log is whole from position {retention.low_water_mark() + 1}; {last}"


        with EventStore.open("sqlite:///shop.db") as store:
            store.append("order-1", [NewEvent("Placed", {})])
            assert health(store) == "the log is whole from position 1; no run yet"
    """

    @abc.abstractmethod
    def low_water_mark(self) -> int:
        """Where the log in the store begins to be whole: 0 until a run, then its `up_to`."""

    @abc.abstractmethod
    def runs(self) -> list[RetentionRun]:
        """The runs so far, oldest first."""

    @abc.abstractmethod
    def count(
        self,
        policies: Sequence[RetentionPolicy],
        truncations: Sequence[Truncation],
        up_to: int,
        now: datetime,
    ) -> list[int]:
        """How many events each rule (policies, then truncations, then `DELETED_RULE`)
        would remove now; an event two rules name counts for each."""

    @abc.abstractmethod
    def remove(
        self,
        policies: Sequence[RetentionPolicy],
        truncations: Sequence[Truncation],
        up_to: int,
        archive: str,
        now: datetime,
        pace: float = 1.0,
    ) -> RetentionRun:
        """Remove what the rules (and `DELETED_RULE`) name at or below `up_to`, and record
        the run, in one transaction. The caller has archived the log up to `up_to` first.
        With `pace` below 1, PostgreSQL removes a window of positions at a time and rests between
        them, working that fraction of the time (SQLite, whose run holds the only write
        lock, never rests: appends would wait the longer)."""

    @abc.abstractmethod
    def exclusive(self) -> AbstractContextManager[None]:
        """Hold the store's retention lock until the block ends; `RetentionBusy` at once if
        another run (in any process) holds it. Not queued: a run waiting hours behind
        another would then plan on what that one left, which its operator did not see."""

    def close(self) -> None:  # noqa: B027 - a store without retention holds nothing
        """Release connections. Idempotent."""


class NoRetention(Retention):
    """A memory store's: nothing is ever removed, the log begins at position 1."""

    def exclusive(self) -> AbstractContextManager[None]:
        return nullcontext()  # one process's memory: no other run can reach it

    def low_water_mark(self) -> int:
        return 0

    def runs(self) -> list[RetentionRun]:
        return []

    def count(
        self,
        policies: Sequence[RetentionPolicy],
        truncations: Sequence[Truncation],
        up_to: int,
        now: datetime,
    ) -> list[int]:
        raise InvalidEvent("retention needs a SQLite or PostgreSQL store")

    def remove(
        self,
        policies: Sequence[RetentionPolicy],
        truncations: Sequence[Truncation],
        up_to: int,
        archive: str,
        now: datetime,
        pace: float = 1.0,
    ) -> RetentionRun:
        raise InvalidEvent("retention needs a SQLite or PostgreSQL store")


def check_pace(pace: object) -> float:
    """`pace` if it is a share of the time to work: more than 0, at most 1."""
    if isinstance(pace, bool) or not isinstance(pace, int | float) or not 0 < pace <= 1:
        raise InvalidEvent(f"pace must be a number above 0 and at most 1, not {pace!r}")
    return float(pace)


def rest(started: float, pace: float) -> None:
    """After work begun at `started` (perf_counter), rest so that work is `pace` of the time."""
    if pace < 1:
        time.sleep((time.perf_counter() - started) * (1 / pace - 1))


__all__ = [
    "DELETED_RULE",
    "ArchiveUnreadable",
    "Retention",
    "RetentionPolicy",
    "RetentionRun",
    "Truncation",
]
