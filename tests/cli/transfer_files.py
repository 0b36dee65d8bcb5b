"""What the export and import tests share: stores to copy into and the files' lines."""

from __future__ import annotations

import io

import orjson
from eventcraft.eventstore import EventStore

from eventcraft.operations.transfer import export_events


def exported(store: EventStore, **options: object) -> bytes:
    out = io.BytesIO()
    export_events(store, out, **options)  # type: ignore[arg-type]
    return out.getvalue()


def without_positions(ndjson: bytes) -> list[dict[str, object]]:
    documents = [orjson.loads(line) for line in ndjson.splitlines()]
    for document in documents:
        del document["position"]
    return documents
