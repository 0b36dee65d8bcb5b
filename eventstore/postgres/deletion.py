"""Deleted streams in PostgreSQL: the functions that check appends against deletions and
delete, and what their answers mean, for the sync and async backends alike.

`eventcraft_insert_events` (`schema.py`) begins with one statement,
`base := eventcraft_deletion_base(p_stream, base)`: nothing for a stream
never deleted (one probe of an empty table's key); for a tombstone it
raises `STREAM_TOMBSTONED_SQLSTATE`, which refuses that append alone (in a
group, that member alone); for a stream deleted at d and not written
since, it turns `NO_STREAM` or `ANY` into "exactly at the newest stored
version", so that the new events follow it, and refuses any other version
as wrong (its reads show 0). A stream written since its deletion is
checked as any other, but for `NO_STREAM`, refused.

`eventcraft_delete_stream` takes the append lock exclusively: it waits for
the appends in flight, and those after it see its row, so that its version
check and its row are atomic with every append. It holds the lock for one
short statement; readers take it for a writer meanwhile (it draws no
positions), as the ordering rule of `schema.py` allows.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg

from ..deletion import StreamDeletion
from ..errors import EventStoreError, StreamTombstoned, WrongExpectedVersion
from ..events import StreamState
from ..sql.deletion import (
    DELETED_STREAMS,
    POSTGRES_TABLE,
    STREAM_TOMBSTONED_SQLSTATE,
    placed_deletions,
)
from ..sql.schema import EVENTS, LOG_LOCK_KEY, WRONG_EXPECTED_VERSION_SQLSTATE

_BASE = f"""
CREATE OR REPLACE FUNCTION eventcraft_deletion_base(p_stream text, p_expected bigint)
RETURNS bigint LANGUAGE plpgsql STABLE AS $$
-- The expected version eventcraft_insert_events goes on with (eventstore/deletion_postgres.py).
DECLARE
    deleted bigint;
    tombstoned boolean;
    stored bigint;
BEGIN
    SELECT version, tombstone INTO deleted, tombstoned
    FROM {DELETED_STREAMS} WHERE stream_id = p_stream;
    IF NOT FOUND THEN
        RETURN p_expected;
    END IF;
    IF tombstoned THEN
        RAISE EXCEPTION USING
            ERRCODE = '{STREAM_TOMBSTONED_SQLSTATE}',
            MESSAGE = 'stream tombstoned',
            DETAIL = p_stream;
    END IF;
    stored := (SELECT coalesce(max(version), 0) FROM {EVENTS} WHERE stream_id = p_stream);
    IF stored <= deleted THEN
        IF p_expected <= 0 THEN
            RETURN stored;  -- NO_STREAM or ANY: the new events follow the newest stored
        END IF;
        RAISE EXCEPTION USING
            ERRCODE = '{WRONG_EXPECTED_VERSION_SQLSTATE}',
            MESSAGE = 'wrong expected version',
            DETAIL = 0;
    END IF;
    IF p_expected = 0 THEN
        RAISE EXCEPTION USING
            ERRCODE = '{WRONG_EXPECTED_VERSION_SQLSTATE}',
            MESSAGE = 'wrong expected version',
            DETAIL = stored;
    END IF;
    RETURN p_expected;
END
$$"""

_DELETE = f"""
CREATE OR REPLACE FUNCTION eventcraft_delete_stream(
    p_stream text, p_expected bigint, p_tombstone boolean
) RETURNS {DELETED_STREAMS} LANGUAGE plpgsql AS $$
-- p_expected as eventcraft_append takes it, checked against the version reads show.
DECLARE
    deleted bigint;
    tombstoned boolean;
    stored bigint;
    shown bigint;
    kept {DELETED_STREAMS};
BEGIN
    -- Exclusive: no append is in flight, and those to come see the row.
    PERFORM pg_advisory_xact_lock({LOG_LOCK_KEY});
    SELECT version, tombstone INTO deleted, tombstoned
    FROM {DELETED_STREAMS} WHERE stream_id = p_stream;
    IF tombstoned THEN
        RAISE EXCEPTION USING
            ERRCODE = '{STREAM_TOMBSTONED_SQLSTATE}',
            MESSAGE = 'stream tombstoned',
            DETAIL = p_stream;
    END IF;
    stored := (SELECT coalesce(max(version), 0) FROM {EVENTS} WHERE stream_id = p_stream);
    shown := CASE WHEN stored <= deleted THEN 0 ELSE stored END;
    IF p_expected >= 0 AND p_expected <> shown THEN
        RAISE EXCEPTION USING
            ERRCODE = '{WRONG_EXPECTED_VERSION_SQLSTATE}',
            MESSAGE = 'wrong expected version',
            DETAIL = shown;
    END IF;
    INSERT INTO {DELETED_STREAMS} AS d (stream_id, version, tombstone, deleted_at)
    VALUES (p_stream, stored, p_tombstone, now())
    ON CONFLICT (stream_id) DO UPDATE SET version = excluded.version,
        tombstone = excluded.tombstone, deleted_at = excluded.deleted_at
    RETURNING d.* INTO kept;
    RETURN kept;
END
$$"""

DELETE = (
    "SELECT stream_id, version, tombstone, deleted_at FROM eventcraft_delete_stream(%s, %s, %s)"
)
"""A deletion: the stream, its expected version as the append function takes it, tombstone."""
DELETED_AT = (
    f"UPDATE {DELETED_STREAMS} SET deleted_at = %s WHERE stream_id = %s "
    "RETURNING stream_id, version, tombstone, deleted_at"
)
"""After `DELETE`, in its transaction: the time an import gives a deletion (the function
takes the transaction's), with the stream."""
DELETION = (
    f"SELECT stream_id, version, tombstone, deleted_at FROM {DELETED_STREAMS} WHERE stream_id = %s"
)


def ddl() -> list[str]:
    """What a store needs to delete streams: the table and both functions."""
    return [POSTGRES_TABLE, _BASE, _DELETE]


PLACED = placed_deletions("%s")
"""Its parameters: `deletion_sql.placed_parameters`."""


def placed(rows: list[tuple[Any, ...]]) -> list[tuple[int, StreamDeletion]]:
    """`Backend.placed_deletions` of the rows of `PLACED`."""
    return [
        (int(row[0]), StreamDeletion(row[1], int(row[2]), bool(row[3]), row[4])) for row in rows
    ]


def deletion(row: tuple[Any, ...] | None) -> StreamDeletion | None:
    if row is None:
        return None
    stream_id, version, tombstone, deleted_at = row
    assert isinstance(deleted_at, datetime)
    return StreamDeletion(stream_id, int(version), bool(tombstone), deleted_at)


def refusal(
    error: psycopg.Error, stream_id: str, expected: int | StreamState
) -> EventStoreError | None:
    """What a deletion's error means to its caller; None for an error that is no refusal."""
    sqlstate = getattr(error, "sqlstate", None)
    if sqlstate == STREAM_TOMBSTONED_SQLSTATE:
        return StreamTombstoned(stream_id)
    if sqlstate == WRONG_EXPECTED_VERSION_SQLSTATE:
        detail = getattr(getattr(error, "diag", None), "message_detail", None)
        return WrongExpectedVersion(stream_id, expected, int(detail or 0))
    return None
