"""The one schema of the event store, for every SQL backend.

Tables are SQLAlchemy Core definitions; each backend compiles them for its
dialect with `ddl(dialect)` and runs the statements on its own driver, so
the hot paths pay nothing for an ORM or an engine.

The global-ordering rule (PostgreSQL)
-------------------------------------
Positions come from a sequence, handed out in one order, while transactions
commit in another: a reader could see position 11 before 10 commits and move
past 10 for ever. Locking the table around every append prevents it but
serializes all writers. Instead readers follow one rule (`postgres/head.py`):

    a gap in positions just below row p may be passed only if no *writer* is
    still running whose xid is below the xid that inserted p,

where a writer is a transaction that has drawn, or may still draw, positions
from this store's sequence: one that holds the store's append lock.

The append function (below) does four things in this order: it takes the
append lock, a transaction-level advisory lock in shared mode keyed by the
events table (`LOG_LOCK_KEY`; appends never wait for each other on it); it
takes its top-level xid (`pg_current_xact_id()`); it takes its positions
(`nextval`); and it inserts its rows inside a subtransaction, so that each
row's `xmin` is a subtransaction xid drawn *after* every position of the
append. (The xid is drawn by the first row written, not by `nextval`: a
single row may take its position in the statement that inserts it.)

Why this is correct. A reader runs one statement: its snapshot S is taken at
the start, then it reads the lock table. Its blockers are the xids S lists as
running that, when the lock table is read, either still hold the append lock
or are no longer running (they ended after S; whether they were writers can
no longer be told, so they count). Let row p be visible in S and H hold a
position g < p that S does not show. H took the lock and its xid before g;
the sequence hands out values in call order (CACHE 1), so H took g before
p's writer took p, and p's writer drew xmin(p) after that: xid(H) < xmin(p),
since xids are handed out in order too. p's writer committed before S, so H
had its xid and the lock before S was taken, and keeps the lock until it
ends. So either H had ended before S (g is visible in S or was rolled back
and stays empty for ever), or S lists H as running, and when the lock table
is read H still holds the lock or has ended: H is a blocker below xmin(p),
and the reader does not pass g. A reader that passes the gap loses nothing.

A transaction that never takes the lock (in another database, on a user's
table, a rebuild's long write, a prepared transaction, an idle session in a
transaction) is running and holds no append lock when the reader looks: it
blocks nothing. A transaction that takes the lock later draws its positions
later, above every row the reader can see.

Reading the lock table costs a scan of the lock manager, so readers first try
the coarser rule it refines, with the snapshot's xmin (the oldest transaction
running anywhere) as the bound: one index probe, and all a read pays while
the log has no gap, or only gaps whose writers have ended. Only a read that
stops short of a committed row asks the lock table.

A large batch is written by several calls of the function in one
transaction (`postgres/wire.py`, `append_in_parts`). The argument holds for
each call's rows: the lock and the top-level xid come first, in the first
call, and each call takes its positions before its own subtransaction draws
the xid its rows carry.

Each step matters. Had H taken g before having an xid, no snapshot would
show H running, and the rule would let readers skip g. Had H drawn positions
without the lock, it would look like any other transaction and be passed.
Had p's rows been stamped with the top-level xid, drawn before p's
positions, H could hold a larger xid than p and still be running. And a
snapshot's xmax is no bound either: it is one past the highest *completed*
xid, and running xids above it are listed nowhere.

Rows store only the low 32 bits of their xid; comparing them with 64-bit
xids modulo 2**32 is exact for rows written within the last two billion
transactions, and errs on the safe side (not yet passable) for older ones.

The same rule defines the safe high-water mark that projections and the
Spark replay read up to: the highest position below which every gap is
passed by the rule.

SQLite serializes writers (BEGIN IMMEDIATE) and a transaction's positions
are taken inside its write lock, so commits are visible in position order
and positions have no gaps: its high-water mark is simply the last position.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine.interfaces import Dialect
from sqlalchemy.schema import CreateIndex, CreateSequence, CreateTable

from .deletion_sql import DELETED_STREAMS

EVENTS = "eventcraft_events"
TAGS = "eventcraft_tags"
STREAMS = "eventcraft_streams"
SNAPSHOTS = "eventcraft_snapshots"
POSITION_SEQUENCE = "eventcraft_position_seq"
NOTIFY_CHANNEL = "eventcraft_events"
"""PostgreSQL channel told of every committed append; the payload is the store's schema."""
EARLIER_LAYOUT = f"{STREAMS}.version"
"""In `ddl`'s `existing`: the store has the layout of earlier releases (see `ddl`)."""
_EARLIER_NOTIFY_FUNCTION = "eventcraft_notify"
_EARLIER_APPEND = "eventcraft_append(text, text, bigint, uuid[], text[], text[], text[])"

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
_EARLIER_APPEND_GROUP = f"{APPEND_GROUP}(text)"

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
# events in position order (schema_tags.py). The type is here so that an item's types
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


_POSTGRES_APPEND_ONLY = [
    f"""
CREATE FUNCTION eventcraft_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING
        ERRCODE = '{APPEND_ONLY_SQLSTATE}',
        MESSAGE = format('%s is append-only: %s refused', TG_TABLE_NAME, TG_OP);
END
$$""",
    f"""CREATE TRIGGER {EVENTS}_append_only BEFORE UPDATE OR DELETE ON {EVENTS}
    FOR EACH ROW EXECUTE FUNCTION eventcraft_refuse_change()""",
    f"""CREATE TRIGGER {EVENTS}_no_truncate BEFORE TRUNCATE ON {EVENTS}
    FOR EACH STATEMENT EXECUTE FUNCTION eventcraft_refuse_change()""",
]

_SQLITE_TRIGGERS = [
    f"""CREATE TRIGGER {EVENTS}_no_{op.lower()} BEFORE {op} ON {EVENTS}
    BEGIN SELECT RAISE(ABORT, '{EVENTS} is append-only: {op} refused'); END"""
    for op in ("UPDATE", "DELETE")
]

DIALECTS: dict[str, Dialect] = {
    "postgresql": postgresql.dialect(),  # type: ignore[no-untyped-call]
    "sqlite": sqlite.dialect(),
}


def ddl(dialect_name: str, existing: frozenset[str] = frozenset()) -> list[str]:
    """Every statement that creates the schema, in order, but for the `existing` objects.

    `existing` names the tables the database holds, `EARLIER_LAYOUT` if it
    was made by a release that kept each stream's version in the streams
    table, `APPEND_IS_CURRENT` if its append function is this release's,
    `PLANS_KEPT` if its stream version and condition functions are plpgsql, and
    `QUERY_IN_ONE` if its query function is this release's. A
    store made by an older release lacks only newer objects: opening it adds
    them and brings the older ones up to date. `APPEND_GROUP` is in it when the
    group append function exists, `STREAMS_CATEGORY_INDEX` when the streams' index by
    category (dropped) does. On SQLite, `STREAMS_WITH_ROWID` and an index's
    name followed by `ROWID_IN_INDEX` say what an earlier release laid out
    otherwise (`_sqlite_upgrades`).
    """
    from . import schema_appends  # it builds on this module's names

    dialect = DIALECTS[dialect_name]
    postgres = dialect_name == "postgresql"
    fresh = EVENTS not in existing
    statements: list[str] = []
    if postgres and fresh:
        statements.append(str(CreateSequence(position_sequence).compile(dialect=dialect)))
    for table in metadata.sorted_tables:
        if table.name in existing:
            continue
        statements.append(str(CreateTable(table).compile(dialect=dialect)).strip())
        for index in sorted(table.indexes, key=lambda i: str(i.name)):
            statements.append(_create_index(index, dialect))
    if not postgres:
        statements += _sqlite_upgrades(existing)
    if EARLIER_LAYOUT in existing and (postgres or STREAMS_WITH_ROWID not in existing):
        # Versions now come from the events themselves; the commit-time NOTIFY
        # became the writer's own, sent after its commit (postgres/wire.py).
        statements.append(f"ALTER TABLE {STREAMS} DROP COLUMN version")
        if postgres:
            statements.append(f"DROP FUNCTION IF EXISTS {_EARLIER_NOTIFY_FUNCTION}() CASCADE")
            statements.append(f"DROP FUNCTION IF EXISTS {_EARLIER_APPEND}")
    if postgres and not fresh:
        from . import keyed_indexes  # it builds on this module's names

        statements += keyed_indexes.upgrades(existing)
    if STREAMS_CATEGORY_INDEX in existing:
        # IF EXISTS: a SQLite streams table rebuilt above took its indexes with it.
        statements.append(f"DROP INDEX IF EXISTS {STREAMS_CATEGORY_INDEX}")
    if not fresh and TAGGED not in existing:
        statements.append(
            f"ALTER TABLE {EVENTS} ADD COLUMN tags {'text[]' if postgres else 'TEXT'}"
        )
    append_current = APPEND_IS_CURRENT in existing and not fresh
    if postgres and not (append_current and APPEND_GROUP in existing):
        # An older store gets this release's append functions (the append lock, times
        # kept, groups of appends, tags), which share eventcraft_insert_events.
        statements += [schema_appends.STREAM_VERSION, schema_appends.INSERT_EVENTS]
    if postgres and not append_current:
        statements.append(schema_appends.APPEND)
    if postgres:
        from . import schema_tags  # it builds on this module's names

        if APPEND_GROUP not in existing:
            statements.append(f"DROP FUNCTION IF EXISTS {_EARLIER_APPEND_GROUP}")
            statements += [*schema_tags.FUNCTIONS, schema_appends.APPEND_GROUP_FUNCTION]
        else:
            if PLANS_KEPT not in existing:  # made while these two were sql functions
                statements += [schema_appends.STREAM_VERSION, schema_tags.FIRST_MATCH]
            if QUERY_IN_ONE not in existing:
                statements.append(schema_tags.QUERY_POSITIONS)
    if DELETED_STREAMS not in existing:
        # Deleted streams: their table and functions, and in a store made before, the
        # append functions that check them (deletion_postgres.py).
        from . import deletion_postgres, deletion_sql

        if postgres:
            statements += deletion_postgres.ddl()
            if append_current and APPEND_GROUP in existing:
                statements += [schema_appends.INSERT_EVENTS, schema_appends.APPEND_GROUP_FUNCTION]
        else:
            statements.append(deletion_sql.SQLITE_TABLE)
    if fresh:
        statements += _POSTGRES_APPEND_ONLY if postgres else _SQLITE_TRIGGERS
    return statements


def _create_index(index: sa.Index, dialect: Dialect) -> str:
    """CREATE INDEX of `index`; on SQLite without a trailing position, which every
    entry of a SQLite index ends with already as its rowid: (category) is in position
    order within a category, as (category, position) is elsewhere, and a fifth smaller.
    On PostgreSQL the category and type indexes are keyed by hash (keyed_indexes.py)."""
    from . import keyed_indexes  # it builds on this module's names

    columns = [column.name for column in index.columns]
    keyed = columns[0] in keyed_indexes.KEYED and index.table.name == EVENTS  # type: ignore[union-attr]
    if dialect.name == "postgresql" and keyed:
        return keyed_indexes.create(columns[0])
    if dialect.name == "sqlite" and columns[-1] == "position" and len(columns) > 1:
        return f"CREATE INDEX {index.name} ON {index.table} ({', '.join(columns[:-1])})"
    return str(CreateIndex(index).compile(dialect=dialect))


def _sqlite_upgrades(existing: frozenset[str]) -> list[str]:
    """What brings a SQLite store made by an earlier release to this layout: indexes
    without the position their entries carry already, the streams without a rowid. The
    events are not touched: their ids stay as they were written (`TEXT_IDS`)."""
    dialect = DIALECTS["sqlite"]
    statements = []
    for index in sorted(events.indexes, key=lambda i: str(i.name)):
        if f"{index.name}{ROWID_IN_INDEX}" in existing:
            statements += [f"DROP INDEX {index.name}", _create_index(index, dialect)]
    if STREAMS_WITH_ROWID in existing:
        # Its rows copied over; a stream's version comes from its events (EARLIER_LAYOUT).
        earlier = f"{STREAMS}_earlier"
        statements += [
            f"ALTER TABLE {STREAMS} RENAME TO {earlier}",
            str(CreateTable(streams).compile(dialect=dialect)).strip(),
            f"INSERT INTO {STREAMS} (stream_id, category) SELECT stream_id, category "
            f"FROM {earlier}",
            f"DROP TABLE {earlier}",
            *(_create_index(index, dialect) for index in streams.indexes),
        ]
    return statements


TABLES = frozenset(table.name for table in metadata.sorted_tables) | {DELETED_STREAMS}
