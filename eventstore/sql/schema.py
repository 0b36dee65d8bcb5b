"""The one schema of the event store, for every SQL backend.

Tables are SQLAlchemy Core definitions; each backend compiles them for its
dialect with `ddl(dialect)` and runs the statements on its own driver, so
the hot paths pay nothing for an ORM or an engine.

Each backend makes its schema from these tables with its own `ddl` (`sqlite/schema.py`,
`postgres/schema.py`), which also brings a store made by an earlier release up to date.
How each keeps the global log in order is said there: PostgreSQL's rule is the long one.
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine.interfaces import Dialect
from sqlalchemy.schema import CreateTable

from .deletion import DELETED_STREAMS

EVENTS = "eventcraft_events"
TAGS = "eventcraft_tags"
STREAMS = "eventcraft_streams"
SNAPSHOTS = "eventcraft_snapshots"
POSITION_SEQUENCE = "eventcraft_position_seq"
NOTIFY_CHANNEL = "eventcraft_events"
"""PostgreSQL channel told of every committed append; the payload is the store's schema."""
EARLIER_LAYOUT = f"{STREAMS}.version"
"""In `ddl`'s `existing`: the store has the layout of earlier releases (see `ddl`)."""

LOG_LOCK_TAG = 0x6563
"""The high 32 bits of the append lock's key ("ec"); the low 32 are the events table's oid,
so each store (each schema) has its own lock."""
LOG_LOCK_KEY = f"(({LOG_LOCK_TAG}::bigint << 32) | '{EVENTS}'::regclass::oid::bigint)"
"""The append lock's key in SQL: `pg_locks` shows it as classid `LOG_LOCK_TAG`, objid the
table's oid, objsubid 1."""
APPEND_IS_CURRENT = "eventcraft_append.current"
"""In `ddl`'s `existing`: the store's append function is this release's (it takes the
append lock, and writes through `eventcraft_insert_events`, which keeps an event's given
`recorded_at`)."""
APPEND_CURRENT_MARKS = ("pg_advisory_xact_lock_shared", "eventcraft_insert_events")
"""Text found in the source of this release's append function, and in no earlier one's."""

ROWID_IN_INDEX = ".position"
"""In `ddl`'s `existing` after an index's name: a SQLite store made before keys that
index by position as well, which SQLite's index entries carry already (their rowid)."""
STREAMS_WITH_ROWID = f"{STREAMS}.rowid"
"""In `ddl`'s `existing`: a SQLite store made before keeps its streams in a rowid table."""
TAGGED = f"{EVENTS}.tags"
"""In `ddl`'s `existing`: the events table has its tags column (stores made before have
not: opening one adds it, empty)."""
TEXT_IDS = f"{EVENTS}.id text"
"""In `ddl`'s `existing`: a SQLite store made before holds its ids as 32 characters of
hexadecimal text; rows appended since hold 16 bytes, and the old ones keep their text."""

STREAMS_CATEGORY_INDEX = f"{STREAMS}_category"
"""In `ddl`'s `existing`: a store made before keeps an index of its streams by category,
which listing a category no longer reads (`events.category_range`); opening it drops it."""

PLANS_KEPT = "eventcraft_stream_version.plpgsql"
"""In `ddl`'s `existing`: the store's functions that append and check conditions run
queries whose plans the session keeps (a store made before called two sql functions,
planned again in every transaction)."""

QUERY_IN_ONE = "eventcraft_query_positions.lateral"
"""In `ddl`'s `existing`: the store's query function reads the items with tags in one
statement (`schema_tags.LATERAL_MARK`); a store made before took each apart in several.
"""

APPEND_GROUP = "eventcraft_append_group"
"""In `ddl`'s `existing`: the store has this release's function that writes a group of
appends (its source holds `APPEND_GROUP_MARK`)."""
APPEND_GROUP_MARK = "eventcraft_lock_for"
APPEND_GROUP_SIGNATURE = f"{APPEND_GROUP}(text, text)"

APPEND_AT_ANY = -1
"""The append function's expected version for ANY (0 is no stream, n is version n)."""
WRONG_EXPECTED_VERSION_SQLSTATE = "EC001"
"""Raised by the PostgreSQL append function; the error's DETAIL is the actual version."""
APPEND_ONLY_SQLSTATE = "EC002"
"""Raised by the triggers that refuse updates and deletes of events."""
CONDITION_FAILED_SQLSTATE = "EC003"
"""An append's condition met a matching event; the DETAIL is its position."""
STREAM_FULL_SQLSTATE = "EC004"
"""An append would take its stream past `MAX_STREAM_VERSION`; the DETAIL is that most."""

metadata = sa.MetaData()

position_sequence = sa.Sequence(POSITION_SEQUENCE, metadata=metadata, cache=1)
"""CACHE 1 keeps nextval in call order across sessions, which the ordering rule needs."""

_big_int = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_json = sa.Text().with_variant(postgresql.JSONB(), "postgresql")
_timestamp = sa.DateTime(timezone=True).with_variant(sa.Text(), "sqlite")
# Byte order, which for UTF-8 is code-point order: streams list in the same
# order on every backend (SQLite compares text this way already).
_name = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")
# 16 bytes on SQLite, where a UUID would be 32 characters of text (stores made
# before hold such text ids still: `TEXT_IDS`).
_uuid = sa.Uuid().with_variant(sa.LargeBinary(16), "sqlite")
# NULL for an event without tags, which costs a row nothing on either backend.
_tags = sa.Text().with_variant(postgresql.ARRAY(sa.Text()), "postgresql")

events = sa.Table(
    EVENTS,
    metadata,
    # On SQLite an INTEGER primary key is the rowid: the cheapest ordered key.
    sa.Column("position", _big_int, primary_key=True, autoincrement=False),
    # The fixed-width columns first: PostgreSQL aligns an 8-byte value to 8 bytes, and
    # after a name of any length that cost up to 7 bytes of padding, twice a row. Rows
    # of stores made before keep their order; every statement names its columns.
    sa.Column("recorded_at", _timestamp, nullable=False),
    sa.Column("id", _uuid, nullable=False),
    # 4 bytes: (stream_id, version) index entries of 24 bytes, not 32 (an 8-byte
    # version is aligned to 8 after the name). A stream holds at most
    # MAX_STREAM_VERSION events; stores made before keep their 8-byte versions.
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("stream_id", _name, nullable=False),
    sa.Column("type", sa.Text, nullable=False),
    sa.Column("category", _name, nullable=False),
    sa.Column("data", _json, nullable=False),
    sa.Column("metadata", _json, nullable=False),
    # Sorted, each once: a text[] on PostgreSQL, a JSON array on SQLite.
    sa.Column("tags", _tags, nullable=True),
    sa.UniqueConstraint("stream_id", "version", name=f"{EVENTS}_stream_version"),
    sa.UniqueConstraint("id", name=f"{EVENTS}_id"),
)
# Which read uses which index (README, "The store at scale"): the primary key,
# global reads and the head; (stream_id, version), stream reads and the version
# check of an append; id, idempotent retries and read_event; these two, reads
# by category and by type, each a walk of one index range in position order.
# PostgreSQL keys these two by a hash of the name instead (keyed_indexes.py).
sa.Index(f"{EVENTS}_category_position", events.c.category, events.c.position)
sa.Index(f"{EVENTS}_type_position", events.c.type, events.c.position)

# A row per tag of an event: what queries by tag and append conditions walk, a tag's
# events in position order (postgres/tag_functions.py). The type is here so that an item's types
# filter its tag's rows without visiting the events.
tags = sa.Table(
    TAGS,
    metadata,
    sa.Column("tag", _name, primary_key=True),
    sa.Column("position", _big_int, primary_key=True, autoincrement=False),
    sa.Column("type", sa.Text, nullable=False),
    sqlite_with_rowid=False,
)

# The catalogue of streams, for listing them: a row from a stream's first
# event on. A stream's version is its last event's, read from the events.
streams = sa.Table(
    STREAMS,
    metadata,
    sa.Column("stream_id", _name, primary_key=True),
    sa.Column("category", _name, nullable=False),
    # On SQLite the rows live in the primary key's tree: a rowid table would
    # keep a second tree, keyed by a rowid no read asks for.
    sqlite_with_rowid=False,
)
# No index by category: list_streams(category=C), which the saga orchestrator reads its
# sagas by, walks the primary key's range of C's streams (`events.category_range`).

# Derived data outside the log: one row per stream, replaced by newer ones.
snapshots = sa.Table(
    SNAPSHOTS,
    metadata,
    sa.Column("stream_id", _name, primary_key=True),
    sa.Column("version", sa.BigInteger, nullable=False),
    sa.Column("type", sa.Text, nullable=False),
    sa.Column("schema_version", sa.Integer, nullable=False),
    sa.Column("data", _json, nullable=False),
    sa.Column("recorded_at", _timestamp, nullable=False),
)


DIALECTS: dict[str, Dialect] = {
    "postgresql": postgresql.dialect(),  # type: ignore[no-untyped-call]
    "sqlite": sqlite.dialect(),
}


def table_statements(
    dialect: Dialect, existing: frozenset[str], create_index: Callable[[sa.Index], str]
) -> list[str]:
    """CREATE TABLE, and CREATE INDEX by `create_index`, of each table `existing` lacks."""
    statements: list[str] = []
    for table in metadata.sorted_tables:
        if table.name in existing:
            continue
        statements.append(str(CreateTable(table).compile(dialect=dialect)).strip())
        for index in sorted(table.indexes, key=lambda i: str(i.name)):
            statements.append(create_index(index))
    return statements


TABLES = frozenset(table.name for table in metadata.sorted_tables) | {DELETED_STREAMS}
