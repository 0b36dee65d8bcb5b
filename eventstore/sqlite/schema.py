"""SQLite's schema: the shared tables (`sql/schema.py`) with this backend's indexes and
triggers, and what brings a store made by an earlier release up to date.

SQLite serializes writers (BEGIN IMMEDIATE) and a transaction's positions
are taken inside its write lock, so commits are visible in position order
and positions have no gaps: its high-water mark is simply the last position.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.schema import CreateIndex, CreateTable

from ..sql.deletion import DELETED_STREAMS, SQLITE_TABLE
from ..sql.schema import (
    DIALECTS,
    EARLIER_LAYOUT,
    EVENTS,
    ROWID_IN_INDEX,
    STREAMS,
    STREAMS_CATEGORY_INDEX,
    STREAMS_WITH_ROWID,
    TAGGED,
    events,
    streams,
    table_statements,
)

_TRIGGERS = [
    f"""CREATE TRIGGER {EVENTS}_no_{op.lower()} BEFORE {op} ON {EVENTS}
    BEGIN SELECT RAISE(ABORT, '{EVENTS} is append-only: {op} refused'); END"""
    for op in ("UPDATE", "DELETE")
]


def ddl(existing: frozenset[str] = frozenset()) -> list[str]:
    """Every statement that creates the schema, in order, but for the `existing` objects.

    `existing` names the tables the database holds, `EARLIER_LAYOUT` if it was made by
    a release that kept each stream's version in the streams table; `STREAMS_WITH_ROWID`
    and an index's name followed by `ROWID_IN_INDEX` say what an earlier release laid
    out otherwise (`_upgrades`), `STREAMS_CATEGORY_INDEX` that the streams' index by
    category (dropped) is there.
    """
    fresh = EVENTS not in existing
    statements = table_statements(DIALECTS["sqlite"], existing, _create_index)
    statements += _upgrades(existing)
    if EARLIER_LAYOUT in existing and STREAMS_WITH_ROWID not in existing:
        # Versions now come from the events themselves (a streams table rebuilt by
        # `_upgrades` has lost its version column already).
        statements.append(f"ALTER TABLE {STREAMS} DROP COLUMN version")
    if STREAMS_CATEGORY_INDEX in existing:
        # IF EXISTS: a streams table rebuilt above took its indexes with it.
        statements.append(f"DROP INDEX IF EXISTS {STREAMS_CATEGORY_INDEX}")
    if not fresh and TAGGED not in existing:
        statements.append(f"ALTER TABLE {EVENTS} ADD COLUMN tags TEXT")
    if DELETED_STREAMS not in existing:
        statements.append(SQLITE_TABLE)
    if fresh:
        statements += _TRIGGERS
    return statements


def _create_index(index: sa.Index) -> str:
    """CREATE INDEX of `index` without a trailing position, which every entry of a SQLite
    index ends with already as its rowid: (category) is in position order within a
    category, as (category, position) is elsewhere, and a fifth smaller."""
    columns = [column.name for column in index.columns]
    if columns[-1] == "position" and len(columns) > 1:
        return f"CREATE INDEX {index.name} ON {index.table} ({', '.join(columns[:-1])})"
    return str(CreateIndex(index).compile(dialect=DIALECTS["sqlite"]))


def _upgrades(existing: frozenset[str]) -> list[str]:
    """What brings a SQLite store made by an earlier release to this layout: indexes
    without the position their entries carry already, the streams without a rowid. The
    events are not touched: their ids stay as they were written (`TEXT_IDS`)."""
    dialect = DIALECTS["sqlite"]
    statements = []
    for index in sorted(events.indexes, key=lambda i: str(i.name)):
        if f"{index.name}{ROWID_IN_INDEX}" in existing:
            statements += [f"DROP INDEX {index.name}", _create_index(index)]
    if STREAMS_WITH_ROWID in existing:
        # Its rows copied over; a stream's version comes from its events (EARLIER_LAYOUT).
        earlier = f"{STREAMS}_earlier"
        statements += [
            f"ALTER TABLE {STREAMS} RENAME TO {earlier}",
            str(CreateTable(streams).compile(dialect=dialect)).strip(),
            f"INSERT INTO {STREAMS} (stream_id, category) SELECT stream_id, category "
            f"FROM {earlier}",
            f"DROP TABLE {earlier}",
            *(_create_index(index) for index in streams.indexes),
        ]
    return statements
