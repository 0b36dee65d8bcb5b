"""Writers and a deleter racing on a few shared streams, in processes of their own: the
race test of `test_deletion_race.py` runs them.

Every call is timed with `time.monotonic_ns()`: on Linux that is CLOCK_MONOTONIC, one
clock for every process of the machine, so that the test can tell which calls ended
before others began. Module-level functions so that a spawned process can import them.
"""

from __future__ import annotations

import random
import time
from typing import Any, NamedTuple

from eventcraft.eventstore import (
    ANY,
    AppendResult,
    EventStore,
    NewEvent,
    StreamTombstoned,
    WrongExpectedVersion,
)

from .workers import opened

STREAMS = ("race-0", "race-1", "race-2")
CATEGORY = "race"
AFTER_TOMBSTONES = 3
"""Appends each writer tries on each stream once the deleter is finished."""
LOOK_EVERY = 20
"""Appends a writer makes between two looks at whether the deleter is finished."""
DEADLINE = 60.0
"""Seconds after which a worker whose race has not ended stops with an error instead of
running for ever (a race takes a few)."""

DONE = "done"
WRONG = "wrong"
"""Refused with `WrongExpectedVersion`."""
TOMBSTONED = "tombstoned"
"""Refused with `StreamTombstoned`."""


class Call(NamedTuple):
    """One append or deletion, and what came of it."""

    kind: str
    """"append", "delete" (soft) or "tombstone"."""
    stream: str
    expected: int | None
    """The expected version it was called with; None for `ANY`."""
    started: int
    """`time.monotonic_ns()` just before the call."""
    ended: int
    """`time.monotonic_ns()` just after it answered."""
    outcome: str
    """`DONE`, `WRONG` or `TOMBSTONED`."""
    version: int = 0
    """The append result's version, or the deletion's; 0 if refused."""
    positions: tuple[int, ...] = ()
    """The append result's positions."""
    event_id: str = ""
    """The appended event's id."""
    after_tombstones: bool = False
    """Begun after the deleter said it was finished, every tombstone acknowledged."""


_REFUSED = AppendResult(0, ())


def _append(store: EventStore, stream: str, writer: int, after_tombstones: bool = False) -> Call:
    """Append one event at exactly the version reads show for `stream` now."""
    expected = store.stream_version(stream)
    event = NewEvent("Raced", {"writer": writer})
    started = time.monotonic_ns()
    try:
        result, outcome = store.append(stream, [event], expected_version=expected), DONE
    except WrongExpectedVersion:
        result, outcome = _REFUSED, WRONG
    except StreamTombstoned:
        result, outcome = _REFUSED, TOMBSTONED
    ended = time.monotonic_ns()
    return Call(
        "append",
        stream,
        expected,
        started,
        ended,
        outcome,
        result.version,
        result.positions,
        str(event.id),
        after_tombstones,
    )


def write(url: str, writer: int, seed: int, barrier: Any, finished: Any, api: str) -> list[Call]:
    """Append to random streams, each at the version just read, retrying a refused append
    on a fresh read, until the deleter says it is finished (`finished`); then try
    `AFTER_TOMBSTONES` more on each stream."""
    rng = random.Random(seed)
    calls: list[Call] = []
    with opened(url, api) as store:
        barrier.wait(timeout=DEADLINE)
        deadline = time.monotonic() + DEADLINE
        stream = rng.choice(STREAMS)
        while len(calls) % LOOK_EVERY or not finished.is_set():
            if time.monotonic() > deadline:
                raise RuntimeError(f"writer {writer}: the deleter unfinished after {DEADLINE} s")
            calls.append(_append(store, stream, writer))
            if calls[-1].outcome != WRONG:  # a refused append is retried on the same stream
                stream = rng.choice(STREAMS)
        for stream in STREAMS:
            calls += [_append(store, stream, writer, True) for _ in range(AFTER_TOMBSTONES)]
    return calls


def _delete(store: EventStore, stream: str, expected: int | None, tombstone: bool) -> Call:
    """Delete `stream` at `expected` (None: at ANY)."""
    started = time.monotonic_ns()
    try:
        deletion = store.delete_stream(
            stream, ANY if expected is None else expected, tombstone=tombstone
        )
    except WrongExpectedVersion:
        outcome, version = WRONG, 0
    else:
        outcome, version = DONE, deletion.version
    ended = time.monotonic_ns()
    kind = "tombstone" if tombstone else "delete"
    return Call(kind, stream, expected, started, ended, outcome, version)


def delete(url: str, deletions: int, barrier: Any, finished: Any, api: str) -> list[Call]:
    """Soft-delete the streams in turn, `deletions` times in all, each at the version just
    read once reads show it written (so that each deletion races appends, and each stream
    deleted comes back before it is deleted again), retrying a refused deletion on a fresh
    read; then tombstone every stream at ANY. Says it is finished through `finished`,
    also when it failed, so that the writers stop. The calls in the order they were made."""
    try:
        return _deleted(url, deletions, barrier, api)
    finally:
        finished.set()


def _deleted(url: str, deletions: int, barrier: Any, api: str) -> list[Call]:
    calls: list[Call] = []
    with opened(url, api) as store:
        barrier.wait(timeout=DEADLINE)
        deadline = time.monotonic() + DEADLINE
        for n in range(deletions):
            stream = STREAMS[n % len(STREAMS)]
            deleted = False
            while not deleted:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"deleter: {n} deletions of {deletions} in {DEADLINE} s")
                expected = store.stream_version(stream)
                if expected > 0:
                    calls.append(_delete(store, stream, expected, tombstone=False))
                    deleted = calls[-1].outcome == DONE
        calls += [_delete(store, stream, None, tombstone=True) for stream in STREAMS]
    return calls
