"""Events as JSON documents: one shape for `--json`, exports, imports and downloads."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import orjson

from eventcraft.eventstore import RecordedEvent, recorded_at_text

FIELDS = ("position", "id", "stream_id", "version", "type", "recorded_at", "data", "metadata")
"""The fields every document holds, in the order a document lists them; `tags` follows,
and a document without it (an export of a release before tags) has none."""


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


def event_from_document(document: Mapping[str, Any]) -> RecordedEvent:
    """The event a document describes; `ValueError` naming the field that is wrong."""
    missing = [name for name in FIELDS if name not in document]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    try:
        event = RecordedEvent(
            id=uuid.UUID(document["id"]),
            stream_id=_text(document, "stream_id"),
            version=_count(document, "version"),
            position=_count(document, "position"),
            type=_text(document, "type"),
            data=_object(document, "data"),
            metadata=_object(document, "metadata"),
            recorded_at=datetime.fromisoformat(document["recorded_at"]),
            tags=_tags(document),
        )
    except (TypeError, AttributeError) as error:
        raise ValueError(str(error)) from error
    if event.recorded_at.tzinfo is None:
        raise ValueError("recorded_at has no time zone")
    return event


def _text(document: Mapping[str, Any], name: str) -> str:
    value = document[name]
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, not {value!r}")
    return value


def _tags(document: Mapping[str, Any]) -> tuple[str, ...]:
    """The document's tags, sorted, each once (the store checks each as it appends them)."""
    value = document.get("tags", [])
    if not isinstance(value, list) or not all(isinstance(tag, str) for tag in value):
        raise ValueError(f"tags must be a list of strings, not {value!r:.80}")
    return tuple(sorted(set(value)))


def _count(document: Mapping[str, Any], name: str) -> int:
    value = document[name]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a whole number from 1, not {value!r}")
    return value


def _object(document: Mapping[str, Any], name: str) -> dict[str, Any]:
    value = document[name]
    if not isinstance(value, dict):
        raise ValueError(f"{name} must be a JSON object, not {value!r}")
    return value
