"""Why reads show no event of a stream: it was deleted (when, at what version), it was
tombstoned, or it was never written. What a shell says instead of "no such stream"."""

from __future__ import annotations

from datetime import UTC

from eventcraft.eventstore import EventStore

from .errors import NotFound


def missing_stream(store: EventStore, stream_id: str) -> NotFound:
    """The error for `stream_id`, of which reads show no event: it names the deletion that
    hides its events, with its time (UTC) and version, if there is one."""
    deletion = store.stream_deletion(stream_id)
    if deletion is None:
        return NotFound(f"no stream {stream_id!r} in the store")
    at = deletion.deleted_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    when = f"at {at} UTC, at version {deletion.version}"
    if deletion.tombstone:
        return NotFound(
            f"stream {stream_id!r} was tombstoned {when}: it is deleted for ever (the global "
            "log keeps its events until a retention run removes them)"
        )
    return NotFound(
        f"stream {stream_id!r} was deleted {when}: reads show none of its events until it "
        "is written again (the global log keeps them until a retention run removes them)"
    )
