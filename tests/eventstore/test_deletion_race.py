"""Six processes append to three shared streams, each at exactly the version it just read,
while a seventh soft-deletes the streams the same way and at last tombstones them, on
PostgreSQL and on a SQLite file, through the sync and the async API.

Per stream, the calls that succeeded are the history of a register with compare-and-set
(an append sets it to its version, a deletion to 0, each only if it holds the expected
version). The versions they were told allow one order only: appends by version, each
deletion right after the append of the version it kept. A deletion atomic with appends
(`eventstore/deletion.py`) makes that order one in which every call found the version it
expected, and one that puts no call before another that ended before it began; and once
the tombstone is acknowledged, every append is refused.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import pytest
from eventcraft.eventstore import EventStore, RecordedEvent

from ..processes import PROCESSES
from . import deletion_workers
from .deletion_workers import CATEGORY, DONE, STREAMS, TOMBSTONED, WRONG, Call

WRITERS = 6
DELETIONS = 90
"""Soft deletions in all, the streams in turn, before the tombstones."""


@pytest.fixture(scope="module")
def pool() -> Iterator[tuple[ProcessPoolExecutor, Any]]:
    with (
        PROCESSES.Manager() as manager,
        ProcessPoolExecutor(WRITERS + 1, mp_context=PROCESSES) as pool,
    ):
        yield pool, manager


def _said(call: Call) -> str:
    expected = "ANY" if call.expected is None else call.expected
    return f"{call.kind} of {call.stream} at {expected} (told {call.version})"


def _stored_as_told(acknowledged: Sequence[Call], events: Sequence[RecordedEvent]) -> list[str]:
    """Each acknowledged append stored once, with the version and position it was told,
    and nothing else stored; versions 1..N, each once."""
    found = []
    versions = sorted(e.version for e in events)
    if versions != list(range(1, len(versions) + 1)):
        found.append(f"stored versions are not 1..{len(versions)}: {versions}")
    twice = [i for i, n in Counter(str(e.id) for e in events).items() if n > 1]
    found += [f"event {i} stored more than once" for i in twice]
    told = {c.event_id: (c.version, c.positions) for c in acknowledged}
    kept = {str(e.id): (e.version, (e.position,)) for e in events}
    found += [f"acknowledged append {i} {told[i]} not stored" for i in told.keys() - kept.keys()]
    found += [f"event {i} {kept[i]} stored, never acknowledged" for i in kept.keys() - told.keys()]
    found += [
        f"event {i} stored as {kept[i]}, told {told[i]}"
        for i in told.keys() & kept.keys()
        if kept[i] != told[i]
    ]
    return found


def _replayed(acknowledged: Sequence[Call], deletions: Sequence[Call]) -> tuple[list[str], int]:
    """What the one order the versions allow breaks, and how many appends in it brought
    the stream back after a soft deletion. `deletions` in the order the deleter made them."""
    ranked = [((c.version, 0, n), c) for n, c in enumerate(acknowledged)]
    ranked += [((c.version, 1, n), c) for n, c in enumerate(deletions)]
    order = [c for _, c in sorted(ranked, key=lambda r: r[0])]
    found: list[str] = []
    shown = newest = comebacks = 0
    closed = False
    latest: Call | None = None  # the call before this one in the order that began last
    for call in order:
        if closed:
            found.append(f"{_said(call)} after the tombstone")
        if call.expected is not None and call.expected != shown:
            found.append(f"{_said(call)} where reads showed {shown}")
        if call.kind == "append":
            if call.version != newest + 1:
                found.append(f"{_said(call)} after version {newest}")
            comebacks += shown == 0 and newest > 0
            newest = shown = call.version
        else:
            if call.version != newest:
                found.append(f"{_said(call)} while the newest stored version was {newest}")
            shown = 0
            closed = call.kind == "tombstone"
        if latest is not None and call.ended < latest.started:
            found.append(f"{_said(call)} ended before {_said(latest)}, ordered first, began")
        if latest is None or call.started > latest.started:
            latest = call
    return found, comebacks


def _refused_after(tombstone: Call, appends: Sequence[Call]) -> list[str]:
    """Every append begun after the tombstone was acknowledged refused as tombstoned, and
    none refused so before the tombstone was asked for."""
    found = [
        f"{_said(c)} begun after the tombstone: {c.outcome}"
        for c in appends
        if c.started > tombstone.ended and c.outcome != TOMBSTONED
    ]
    found += [
        f"{_said(c)} refused as tombstoned before the tombstone"
        for c in appends
        if c.outcome == TOMBSTONED and c.ended < tombstone.started
    ]
    return found


@pytest.mark.slow
@pytest.mark.parametrize("api", ["sync", "async"])
def test_deletions_racing_appends_in_other_processes_run_as_if_one_at_a_time(
    shared_store_url: str, api: str, pool: tuple[ProcessPoolExecutor, Any]
) -> None:
    executor, manager = pool
    EventStore.open(shared_store_url).close()  # create the schema before the race
    barrier = manager.Barrier(WRITERS + 1)
    finished = manager.Event()
    writers = [
        executor.submit(deletion_workers.write, shared_store_url, w, w, barrier, finished, api)
        for w in range(WRITERS)
    ]
    deleter = executor.submit(
        deletion_workers.delete, shared_store_url, DELETIONS, barrier, finished, api
    )
    deletions = deleter.result(timeout=120)
    appends = [call for writer in writers for call in writer.result(timeout=120)]
    with EventStore.open(shared_store_url) as store:
        stored = list(store.read_all(categories=CATEGORY))
        closed = {s: store.stream_deletion(s) for s in STREAMS}
        shown = {s: (store.stream_version(s), list(store.read_stream(s))) for s in STREAMS}

    comebacks = overlaps = 0
    for stream in STREAMS:
        mine = [c for c in appends if c.stream == stream]
        acknowledged = [c for c in mine if c.outcome == DONE]
        done = [c for c in deletions if c.stream == stream and c.outcome == DONE]
        [tombstone] = [c for c in done if c.kind == "tombstone"]
        events = [e for e in stored if e.stream_id == stream]
        assert _stored_as_told(acknowledged, events) == []
        broken, comebacks_here = _replayed(acknowledged, done)
        assert broken == []
        assert _refused_after(tombstone, mine) == []
        assert max((e.version for e in events), default=0) <= tombstone.version
        deletion = closed[stream]
        assert deletion is not None
        assert (deletion.version, deletion.tombstone) == (tombstone.version, True)
        assert shown[stream] == (0, [])
        went_on = [c for c in mine if c.after_tombstones]
        assert len(went_on) == WRITERS * deletion_workers.AFTER_TOMBSTONES
        comebacks += comebacks_here
        overlaps += sum(
            d.started < a.ended and a.started < d.ended for d in done for a in acknowledged
        )

    # The race was real: calls were decided on versions that changed before they were made,
    # deletions were in flight while appends to their stream were, and deleted streams came
    # back.
    assert sum(c.outcome == WRONG for c in [*appends, *deletions]) > 0
    assert overlaps > 0
    assert comebacks > 0
