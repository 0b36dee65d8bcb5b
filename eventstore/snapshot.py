"""Snapshots: the state of a stream at some version, kept beside the log.

A snapshot is derived data that a reader may use instead of replaying a
stream's first events. It lives outside the global log (readers of
`read_all` never see it), only the newest one per stream is kept, and it may
be replaced, unlike an event.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from .encoding import check_name, encode_object
from .errors import InvalidEvent


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The newest snapshot of a stream, as stored.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent, Snapshot

        with EventStore.open("sqlite:///shop.db") as store:
            store.append("order-1", [NewEvent("OrderPlaced", {"cents": 1250})])
            store.save_snapshot("order-1", version=1, type="Order", data={"cents": 1250})
            store.append("order-1", [NewEvent("OrderPaid", {})])
            snapshot: Snapshot | None = store.load_snapshot("order-1")
            assert snapshot is not None and snapshot.data == {"cents": 1250}
            since = store.read_stream("order-1", from_version=snapshot.version + 1)
            assert [event.type for event in since] == ["OrderPaid"]  # the rest of the state
    """

    stream_id: str
    """The stream whose state this is."""
    version: int
    """The stream version the state reflects: events after it are not in it."""
    type: str
    """What kind of state this is (for aggregates, the aggregate's name)."""
    schema_version: int
    """The version of the state's schema, so a reader can ignore a stale one."""
    data: dict[str, Any]
    """The decoded state."""
    recorded_at: datetime
    """When it was saved, timezone-aware (UTC)."""


@dataclass(frozen=True, slots=True)
class PreparedSnapshot:
    """A snapshot checked and encoded, ready for any backend."""

    stream_id: str
    version: int
    type: str
    schema_version: int
    data: bytes


def prepare_snapshot(
    stream_id: str,
    version: object,
    type: str,
    schema_version: object,
    data: dict[str, Any] | BaseModel,
) -> PreparedSnapshot:
    check_name("stream id", stream_id)
    check_name(f"the snapshot type for stream {stream_id!r}", type)
    where = f"snapshot of stream {stream_id!r}"

    def positive(name: str, value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidEvent(f"{where}: {name} must be a positive int, not {value!r}")
        return value

    return PreparedSnapshot(
        stream_id,
        positive("version", version),
        type,
        positive("schema_version", schema_version),
        encode_object(f"{where}: data", data),
    )


def beyond_the_stream(stream_id: str, version: int, actual: int) -> InvalidEvent:
    return InvalidEvent(
        f"snapshot of stream {stream_id!r} at version {version}, "
        f"but the stream is at version {actual}"
    )
