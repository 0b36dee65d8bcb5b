"""Appends made inside a transaction the test keeps open: real appends still in flight."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from eventcraft.eventstore import NewEvent
from eventcraft.eventstore.encoding import PreparedBatch
from eventcraft.eventstore.postgres import batch_json
from eventcraft.eventstore.postgres.wire import APPEND


def append_uncommitted(
    conn: psycopg.Connection[Any], stream_id: str, events: Sequence[NewEvent] | None = None
) -> list[int]:
    """Call the append function on `conn` (not in autocommit) and leave the transaction
    open for the caller to commit or roll back; the positions it drew."""
    batch = PreparedBatch(stream_id, events or [NewEvent("Held", {})]).all()
    row = conn.execute(
        APPEND, (stream_id, stream_id.split("-")[0], -1, batch_json(batch).decode())
    ).fetchone()
    assert row is not None
    return [int(position) for position in row[0].split()[1:]]
