"""Events as JSON documents: one shape for `--json` and downloads, the shape of an
export's lines (`eventstore/json_lines.py`), which an import reads back."""

from __future__ import annotations

from typing import Any

import orjson

from eventcraft.eventstore import RecordedEvent, recorded_at_text


def event_document(event: RecordedEvent) -> dict[str, Any]:
    """The event with every field, as JSON types: ids as text, `recorded_at` as ISO 8601 UTC
    with microseconds (`recorded_at_text`)."""
    return {
        "position": event.position,
        "id": str(event.id),
        "stream_id": event.stream_id,
        "version": event.version,
        "type": event.type,
        "recorded_at": recorded_at_text(event.recorded_at),
        "data": event.data,
        "metadata": event.metadata,
        "tags": list(event.tags),
    }


def event_line(event: RecordedEvent) -> bytes:
    """The event as one NDJSON line, newline included."""
    return orjson.dumps(event_document(event), option=orjson.OPT_APPEND_NEWLINE)
