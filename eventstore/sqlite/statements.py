"""The SQLite store's SQL: every statement of `backend.py`, from parameters only.

Paged reads take `:start` (the key to start after, or at) and `:count` besides
their own parameters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..events import EVENT_VERSION
from ..sql import deletion, schema, stream_listing

E = schema.EVENTS
S = schema.STREAMS
COLUMNS = "id, stream_id, version, position, type, data, metadata, recorded_at, tags"

EXISTING = (
    "SELECT name FROM sqlite_master WHERE type = 'table' "
    "UNION ALL SELECT :earlier FROM pragma_table_info(:streams) WHERE name = 'version' "
    "UNION ALL SELECT list.name || :rowid_in_index FROM pragma_index_list(:events) AS list, "
    "pragma_index_info(list.name) AS info WHERE info.name = 'position' "
    "UNION ALL SELECT :streams_with_rowid FROM sqlite_master "
    "WHERE type = 'table' AND name = :streams AND sql NOT LIKE '%WITHOUT ROWID%' "
    "UNION ALL SELECT :text_ids FROM pragma_table_info(:events) "
    "WHERE name = 'id' AND upper(type) <> 'BLOB' "
    "UNION ALL SELECT :tagged FROM pragma_table_info(:events) WHERE name = 'tags' "
    "UNION ALL SELECT name FROM sqlite_master WHERE type = 'index' AND name = :streams_category"
)
"""What `schema.ddl` needs to know of the store found: its tables, and what an earlier
release laid out otherwise."""
EXISTING_NAMES = {
    "events": E,
    "streams": S,
    "earlier": schema.EARLIER_LAYOUT,
    "rowid_in_index": schema.ROWID_IN_INDEX,
    "streams_with_rowid": schema.STREAMS_WITH_ROWID,
    "text_ids": schema.TEXT_IDS,
    "tagged": schema.TAGGED,
    "streams_category": schema.STREAMS_CATEGORY_INDEX,
}

EVENT_BY_ID = f"SELECT {COLUMNS} FROM {E} WHERE id IN (?, ?)"
"""An event by its id's bytes or, in an older row, its text."""
STREAM_VERSION = deletion.stream_version("?")
"""The version reads show: 0 for a deleted stream not written since."""
_DELETED = deletion.deleted_version(":stream")
NEXT_POSITION = f"SELECT coalesce(max(position), 0) + 1 FROM {E}"
INSERT_EVENT = (
    f"INSERT INTO {E} (position, stream_id, version, id, type, data, metadata, recorded_at, "
    "category, tags) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
INSERT_TAG = f"INSERT INTO {schema.TAGS} (tag, position, type) VALUES (?, ?, ?)"
INSERT_STREAM = f"INSERT INTO {S} (stream_id, category) VALUES (?, ?)"
HEAD = f"SELECT coalesce(max(position), 0) FROM {E}"
SAVE_SNAPSHOT = (
    f"INSERT INTO {schema.SNAPSHOTS} AS s "
    "(stream_id, version, type, schema_version, data, recorded_at) VALUES (?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (stream_id) DO UPDATE SET version = excluded.version, type = excluded.type, "
    "schema_version = excluded.schema_version, data = excluded.data, "
    "recorded_at = excluded.recorded_at WHERE excluded.version >= s.version"
)
LOAD_SNAPSHOT = (
    "SELECT stream_id, version, type, schema_version, data, recorded_at "
    f"FROM {schema.SNAPSHOTS} WHERE stream_id = ? AND {deletion.SNAPSHOT_SHOWN}"
)
READ_STREAM_FORWARDS = (
    f"SELECT {COLUMNS} FROM {E} WHERE stream_id = :stream AND version > {_DELETED} "
    "AND version >= :start ORDER BY version LIMIT :count"
)
READ_STREAM_BACKWARDS = (
    f"SELECT {COLUMNS} FROM {E} WHERE stream_id = :stream AND version > {_DELETED} "
    "AND version <= :start ORDER BY version DESC LIMIT :count"
)
READ_STREAM_ENCODED = (
    f"SELECT version, type, data, metadata -> '$.{EVENT_VERSION}' FROM {E} "
    f"WHERE stream_id = :stream AND version > {_DELETED} AND version >= :start "
    "ORDER BY version LIMIT :count"
)


def ids_in(count: int) -> str:
    """`id IN (...)` with `count` parameters: `count` well under SQLite's limit of them."""
    return f"id IN ({', '.join('?' * count)})"


def stored_ids(count: int) -> str:
    return f"SELECT id, stream_id, version, position FROM {E} WHERE {ids_in(count)}"


def any_stored(count: int) -> str:
    return f"SELECT 1 FROM {E} WHERE {ids_in(count)} LIMIT 1"


def read_all_query(
    last: int,
    categories: Sequence[str] | None,
    types: Sequence[str] | None,
    columns: str = COLUMNS,
) -> tuple[str, dict[str, Any]]:
    """The paged query of the log's `columns` up to position `last`, and its parameters
    but `start` and `count`.

    Several categories (or types) are read as one branch each, compared with
    `=` and walked in position order in their index, then merged: with `IN`,
    SQLite sorts every row of those categories past `start` for each page.
    """
    page = "position > :start AND position <= :last ORDER BY position LIMIT :count"
    params: dict[str, Any] = {"last": last}
    if categories is None and types is None:
        return f"SELECT {columns} FROM {E} WHERE {page}", params
    column, values = ("category", categories) if categories is not None else ("type", types)
    assert values is not None
    also = ""
    if categories is not None and types is not None:
        names = [f":t{n}" for n in range(len(types))]
        # `+`: the types filter the category's rows, their index is not to be walked
        # (without statistics SQLite may take it, and read most of the log).
        also = f"+type IN ({', '.join(names)}) AND "
        params.update({name[1:]: value for name, value in zip(names, types, strict=True)})
    branches = []
    for n, value in enumerate(dict.fromkeys(values)):
        params[f"v{n}"] = value
        branches.append(f"SELECT {columns} FROM {E} WHERE {column} = :v{n} AND {also}{page}")
    if len(branches) == 1:
        return branches[0], params
    union = " UNION ALL ".join(f"SELECT * FROM ({branch})" for branch in branches)
    return f"SELECT * FROM ({union}) ORDER BY position LIMIT :count", params


def count_query(
    last: int, categories: Sequence[str] | None, types: Sequence[str] | None
) -> tuple[str, dict[str, Any]]:
    """How many events `read_all_query` reads from `:start`, at most `:count`: its
    positions alone, which the indexes of categories and types hold."""
    query, params = read_all_query(last, categories, types, "position")
    return f"SELECT count(*) FROM ({query})", params


def count_types_query(last: int, types: Sequence[str] | None) -> tuple[str, dict[str, Any]]:
    """The events in (`:start`, `last`] (of `types`, if given) counted by type and the
    metadata's `EVENT_VERSION` as JSON text (`->`, which tells `2` from `"2"`), each group
    with its last position and when that event was recorded; its parameters but `start`."""
    params: dict[str, Any] = {"last": last}
    where = "position > :start AND position <= :last"
    if types is not None:
        names = [f":t{n}" for n in range(len(types))]
        params.update({name[1:]: value for name, value in zip(names, types, strict=True)})
        where += f" AND type IN ({', '.join(names)})"
    return (
        f"WITH counted AS (SELECT type, metadata -> '$.{EVENT_VERSION}' AS event_version, "
        f"count(*) AS events, max(position) AS last FROM {E} WHERE {where} GROUP BY 1, 2) "
        "SELECT type, event_version, events, last, "
        f"(SELECT recorded_at FROM {E} WHERE position = counted.last) FROM counted",
        params,
    )


def list_streams_query(
    category: str | None, after: str | None, limit: int | None
) -> tuple[str, dict[str, Any]]:
    # A negative LIMIT is none on SQLite, where NULL is refused.
    return stream_listing.list_streams_query(
        category, after, -1 if limit is None else limit, ":{}".format
    )
