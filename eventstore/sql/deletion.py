"""Deleted streams in SQL: the table, what reads add to hide a deleted stream's events,
and SQLite's deletion (PostgreSQL's is a function of the schema: `postgres/deletion.py`).

A stream deleted at version d shows only its events above d; it is left
out of `list_streams` until an append brings it back. Reads ask the table
with one probe of its primary key, by the stream they read.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

from ..deletion import StreamDeletion, check_delete, refuse_tombstoned, visible_version
from ..events import StreamState

DELETED_STREAMS = "eventcraft_deleted_streams"
"""One row per deleted stream: its version when deleted, and whether it is a tombstone."""
STREAM_TOMBSTONED_SQLSTATE = "EC021"
"""Raised by PostgreSQL's append functions for an append to a tombstoned stream, and by a
deletion of one; the error's DETAIL is the stream."""

E = "eventcraft_events"  # schema.EVENTS; schema imports this module
S = "eventcraft_snapshots"  # schema.SNAPSHOTS

POSTGRES_TABLE = f"""CREATE TABLE IF NOT EXISTS {DELETED_STREAMS} (
    stream_id text COLLATE "C" PRIMARY KEY,
    version bigint NOT NULL,
    tombstone boolean NOT NULL,
    deleted_at timestamptz NOT NULL
)"""
SQLITE_TABLE = f"""CREATE TABLE IF NOT EXISTS {DELETED_STREAMS} (
    stream_id TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    tombstone INTEGER NOT NULL,
    deleted_at TEXT NOT NULL
) WITHOUT ROWID"""


def deleted_version(stream: str) -> str:
    """The version the stream named by the parameter `stream` was deleted at, 0 if it was
    not: an uncorrelated subquery, which both databases evaluate once per statement."""
    return f"coalesce((SELECT d.version FROM {DELETED_STREAMS} d WHERE d.stream_id = {stream}), 0)"


def stream_version(stream: str) -> str:
    """The version reads show for the stream named by `stream` (once, positionally): its
    newest event's above its deletion, else 0."""
    return (
        f"SELECT coalesce(max(e.version), 0) FROM {E} e WHERE e.stream_id = {stream} AND "
        f"e.version > coalesce((SELECT d.version FROM {DELETED_STREAMS} d "
        "WHERE d.stream_id = e.stream_id), 0)"
    )


SNAPSHOT_SHOWN = (
    f"version > coalesce((SELECT d.version FROM {DELETED_STREAMS} d "
    f"WHERE d.stream_id = {S}.stream_id), 0)"
)
"""A snapshot taken before its stream was deleted is not loaded."""


def listed(alias: str) -> str:
    """The streams `list_streams` shows, as a condition on the streams table's `alias`:
    not deleted, or written since."""
    return (
        f"NOT EXISTS (SELECT 1 FROM {DELETED_STREAMS} d WHERE d.stream_id = {alias}.stream_id "
        f"AND d.version >= (SELECT max(e.version) FROM {E} e "
        f"WHERE e.stream_id = {alias}.stream_id))"
    )


def placed_deletions(parameter: str) -> str:
    """The deletions whose stream's event at the version deleted lies after the first
    parameter and at or below the second (`parameter` is the dialect's placeholder), with
    that event's position, and, when the third is 0, those of streams deleted before their
    first event, at position 0; in position order (then by stream): one walk of the
    deleted streams, each joined by (stream, version), the key of stream reads. The
    parameters: `placed_parameters`."""
    return (
        "SELECT coalesce(e.position, 0), d.stream_id, d.version, d.tombstone, d.deleted_at "
        f"FROM {DELETED_STREAMS} d LEFT JOIN {E} e "
        "ON e.stream_id = d.stream_id AND e.version = d.version "
        f"WHERE (e.position > {parameter} AND e.position <= {parameter}) "
        f"OR (d.version = 0 AND {parameter} = 0) ORDER BY 1, 2"
    )


def placed_parameters(after: int, until: int) -> tuple[int, int, int]:
    """The parameters of `placed_deletions`' statement for the span (`after`, `until`]."""
    return after, until, after


# --- SQLite: the store's connection, inside its write transaction ------------------

_SQLITE_STORED_VERSION = f"SELECT coalesce(max(version), 0) FROM {E} WHERE stream_id = ?"
_SQLITE_DELETION = (
    f"SELECT stream_id, version, tombstone, deleted_at FROM {DELETED_STREAMS} WHERE stream_id = ?"
)
_SQLITE_DELETE = (
    f"INSERT INTO {DELETED_STREAMS} (stream_id, version, tombstone, deleted_at) "
    "VALUES (?, ?, ?, ?) ON CONFLICT (stream_id) DO UPDATE SET version = excluded.version, "
    "tombstone = excluded.tombstone, deleted_at = excluded.deleted_at"
)


def sqlite_deletion(conn: sqlite3.Connection, stream_id: str) -> StreamDeletion | None:
    """The stream's deletion, None if it has none (or the store predates deletions)."""
    row = conn.execute(_SQLITE_DELETION, (stream_id,)).fetchone()
    if row is None:
        return None
    stream, version, tombstone, deleted_at = row
    return StreamDeletion(stream, version, bool(tombstone), datetime.fromisoformat(deleted_at))


_SQLITE_PLACED = placed_deletions("?")


def sqlite_placed_deletions(
    conn: sqlite3.Connection, after: int, until: int
) -> list[tuple[int, StreamDeletion]]:
    """`Backend.placed_deletions` on SQLite."""
    return [
        (position, StreamDeletion(stream, version, bool(tomb), datetime.fromisoformat(at)))
        for position, stream, version, tomb, at in conn.execute(
            _SQLITE_PLACED, placed_parameters(after, until)
        )
    ]


def sqlite_append_versions(conn: sqlite3.Connection, stream_id: str) -> tuple[int, int]:
    """The version an append to `stream_id` is checked against (what reads show) and the
    one its events follow (the newest stored); raises `StreamTombstoned`."""
    deletion = sqlite_deletion(conn, stream_id)
    refuse_tombstoned(stream_id, deletion)
    stored = int(conn.execute(_SQLITE_STORED_VERSION, (stream_id,)).fetchone()[0])
    return visible_version(deletion, stored), stored


def sqlite_delete(
    conn: sqlite3.Connection,
    stream_id: str,
    expected: int | StreamState,
    tombstone: bool,
    deleted_at: datetime | None,
) -> StreamDeletion:
    """Delete `stream_id` in the open write transaction, at `deleted_at` (else now), or
    raise as `check_delete` does."""
    stored = int(conn.execute(_SQLITE_STORED_VERSION, (stream_id,)).fetchone()[0])
    check_delete(stream_id, expected, sqlite_deletion(conn, stream_id), stored)
    at = deleted_at or datetime.now(UTC)
    conn.execute(_SQLITE_DELETE, (stream_id, stored, int(tombstone), at.isoformat()))
    return StreamDeletion(stream_id, stored, tombstone, at)
