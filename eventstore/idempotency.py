"""When an append meets ids that are already stored: a retry, or a conflict.

A client that did not hear back from an append (a timeout, a dropped
connection) sends it again with the same event ids. If the first attempt
was committed, the retry must write nothing and answer as the first one
did. Backends call `resolve_stored_ids` only after an append failed its
version check or hit the unique index on event ids, so the common path
pays nothing for this.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .errors import DuplicateEventId
from .events import AppendResult


@dataclass(frozen=True, slots=True)
class StoredId:
    """Where an already-stored event id lives."""

    id: uuid.UUID
    stream_id: str
    version: int
    position: int


def resolve_stored_ids(
    stream_id: str, ids: Sequence[uuid.UUID], stored: Iterable[StoredId]
) -> AppendResult | None:
    """The original result if a batch of `ids` is an exact retry; None if no id is stored.

    Raises `DuplicateEventId` when some id is stored but not as this batch.
    """
    found = {s.id: s for s in stored}
    if not found:
        return None
    hits = [found.get(id) for id in ids]
    present = [hit for hit in hits if hit is not None]
    if len(present) != len(hits):
        some = present[0]
        raise DuplicateEventId(
            stream_id,
            some.id,
            f"in stream {some.stream_id!r} at version {some.version}, "
            # A retention run may have removed a retried batch's older events: say so
            # rather than call them new.
            "while other ids of the batch are not in the store (new, or removed by retention)",
        )
    first = present[0]
    for index, hit in enumerate(present):
        if hit.stream_id != stream_id:
            raise DuplicateEventId(
                stream_id, hit.id, f"in stream {hit.stream_id!r} at version {hit.version}"
            )
        if hit.version != first.version + index:
            raise DuplicateEventId(
                stream_id,
                hit.id,
                f"at version {hit.version}, not in the order of the batch being appended",
            )
    return AppendResult(
        version=first.version + len(ids) - 1,
        positions=tuple(hit.position for hit in present),
    )


def resolve_stored_appends(
    appends: Sequence[tuple[str, Sequence[uuid.UUID]]], stored: Iterable[StoredId]
) -> list[AppendResult] | None:
    """The original results if appends made together (`append_many`) are an exact retry;
    None if none of their ids is stored.

    `appends` are each append's stream and event ids. Raises `DuplicateEventId`
    when some id is stored but not as these appends: one of them stored and
    another not is no retry either, as they were committed all or none.
    """
    by_id = {s.id: s for s in stored}
    if not by_id:
        return None
    results: list[AppendResult] = []
    new: str | None = None
    for stream_id, ids in appends:
        mine = [by_id[id] for id in ids if id in by_id]
        result = resolve_stored_ids(stream_id, ids, mine)
        if result is None:
            new = stream_id
        else:
            results.append(result)
    if new is not None:
        some = next(iter(by_id.values()))
        raise DuplicateEventId(
            some.stream_id,
            some.id,
            f"in stream {some.stream_id!r} at version {some.version}, while the events "
            f"for stream {new!r} appended with it are new",
        )
    return results
