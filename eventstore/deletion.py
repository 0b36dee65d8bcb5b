"""Deleting a stream: hidden from reads (soft), or closed for ever (tombstone).

A deletion is a row beside the log, never an edit of it: the stream's
events stay where they are in the global log (`read_all` goes on showing
them, positions are never reused, and a projection rebuilt after a deletion
equals one built before), until retention removes them, archived first.

What a deletion means, as KurrentDB's users know it:

- **Soft** (`delete_stream(stream_id)`): the stream reads as absent.
  `read_stream` and `read_stream_encoded` return nothing, `stream_version`
  says 0, `list_streams` leaves it out, and its snapshot is no longer
  loaded, so a repository loads a new aggregate. An append brings the
  stream back: it expects `NO_STREAM` (or 0, or `ANY`), and its versions go
  on after the last one deleted, so a version is never given twice; reads
  then show only the events after the deletion. An append expecting a
  version the deleted stream had is refused (`WrongExpectedVersion`, actual
  0): it was decided on what is deleted now.
- **Tombstone** (`delete_stream(stream_id, tombstone=True)`): the same, and
  the stream can never be written again: every append to it (alone, in a
  group, in `append_many`, a retry of events stored before) raises
  `StreamTombstoned`, as does deleting it again. Reads still return
  nothing rather than raise (KurrentDB raises StreamDeleted there): a
  reader needs no new error path, and `stream_deletion(stream_id)` says
  which streams are deleted, and how.

A deletion checks its `expected_version` against the version reads show,
and is atomic with appends: on PostgreSQL it takes the append lock
exclusively for its short transaction (it waits for the appends in flight,
and those that come after see it), on SQLite the write lock, in memory the
store's lock.

Retention removes a deleted stream's events but its newest, which stays
(hidden) so that the stream's versions and SQLite's positions go on from it,
as they do for every stream after retention.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from .errors import StreamTombstoned, WrongExpectedVersion
from .events import ANY, NO_STREAM, StreamState, category_of


@dataclass(frozen=True)
class StreamDeletion:
    """A stream's deletion, as the store keeps it.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent, StreamDeletion

        with EventStore.open("sqlite:///shop.db") as store:
            store.append("cart-7", [NewEvent("ItemAdded", {"sku": "tea"})])
            store.append("cart-7", [NewEvent("ItemAdded", {"sku": "jam"})])
            deletion: StreamDeletion = store.delete_stream("cart-7", tombstone=True)
            assert store.stream_deletion("cart-7") == deletion
            assert list(store.read_stream("cart-7")) == []
        assert (deletion.version, deletion.tombstone) == (2, True)
    """

    stream_id: str
    version: int
    """The stream's version when it was deleted: events up to it are hidden from reads."""
    tombstone: bool
    """The stream can never be written again."""
    deleted_at: datetime
    """When it was deleted, timezone-aware (UTC); an import keeps the original's."""


def visible_version(deletion: StreamDeletion | None, stored: int) -> int:
    """The version reads show for a stream whose newest stored event is `stored`: 0 for a
    deleted stream not written since."""
    if deletion is not None and stored <= deletion.version:
        return 0
    return stored


def refuse_tombstoned(stream_id: str, deletion: StreamDeletion | None) -> None:
    """Raise `StreamTombstoned` if `deletion` is a tombstone."""
    if deletion is not None and deletion.tombstone:
        raise StreamTombstoned(stream_id)


def check_expected(stream_id: str, expected: int | StreamState, visible: int) -> None:
    """Raise `WrongExpectedVersion` unless a stream whose reads show `visible` is at
    `expected` (the check of an append, and of a deletion)."""
    if expected is ANY:
        return
    wanted = 0 if expected is NO_STREAM else expected
    if wanted != visible:
        raise WrongExpectedVersion(stream_id, expected, visible)


def check_delete(
    stream_id: str,
    expected: int | StreamState,
    deletion: StreamDeletion | None,
    stored: int,
) -> None:
    """Raise unless `stream_id` may be deleted now: not a tombstone, at `expected`."""
    refuse_tombstoned(stream_id, deletion)
    check_expected(stream_id, expected, visible_version(deletion, stored))


def of_categories(
    placed: list[tuple[int, StreamDeletion]], categories: Sequence[str] | None
) -> list[tuple[int, StreamDeletion]]:
    """The deletions of `placed` (`placed_deletions`) whose streams are of `categories`;
    all of them for None."""
    if categories is None:
        return placed
    kept = set(categories)
    return [one for one in placed if category_of(one[1].stream_id) in kept]
