"""Deleting a stream: what a deletion would do (`plan`), and the deletion (`delete`), which
re-checks the version the plan showed.

A soft deletion hides the stream from reads until an append brings it back;
a tombstone closes it for ever. Either way the global log keeps its events
(projections are not touched) until a retention run removes them, archived
first (`eventcraft.eventstore.deletion` says what each means).
"""

from __future__ import annotations

from dataclasses import dataclass

from eventcraft.eventstore import EventStore, ExpectedVersion, StreamDeletion

from .errors import InputError, NotFound


@dataclass(frozen=True)
class DeletionPlan:
    """What deleting one stream would do now."""

    stream_id: str
    version: int
    """The version its reads show now: what the deletion expects it to be still at."""
    tombstone: bool
    """The stream would never be written again."""
    deleted: StreamDeletion | None
    """Its earlier (soft) deletion, if any: the versions reads already hide."""


def plan(store: EventStore, stream_id: str, *, tombstone: bool = False) -> DeletionPlan:
    """What deleting `stream_id` would do; refused for a tombstoned stream, and (but for a
    tombstone, which may close a stream before it is written) for one reads do not show."""
    deleted = store.stream_deletion(stream_id)
    if deleted is not None and deleted.tombstone:
        raise InputError(f"stream {stream_id!r} is tombstoned already: there is nothing to do")
    version = store.stream_version(stream_id)
    if version == 0 and not tombstone:
        raise NotFound(
            f"stream {stream_id!r} has no events to delete"
            + (" (it is deleted already)" if deleted is not None else "")
            + "; --tombstone closes it for ever"
        )
    return DeletionPlan(stream_id, version, tombstone, deleted)


def delete(
    store: EventStore,
    stream_id: str,
    *,
    expected_version: ExpectedVersion,
    tombstone: bool = False,
) -> StreamDeletion:
    """Delete `stream_id` if it is still at `expected_version` (what a plan showed): a
    stream written since raises `WrongExpectedVersion`, and nothing is deleted."""
    return store.delete_stream(stream_id, expected_version, tombstone=tombstone)


def describe(planned: DeletionPlan) -> str:
    """What the deletion would do, in a sentence for the person who confirms it."""
    what = "Tombstone" if planned.tombstone else "Delete"
    then = (
        "it can never be written again"
        if planned.tombstone
        else "an append brings it back, its versions going on after"
    )
    return (
        f"{what} stream {planned.stream_id!r} at version {planned.version}? Reads will show "
        f"it as absent and {then}; the global log and the projections keep its events until "
        "a retention run removes them (archived first)"
    )
