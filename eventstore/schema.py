"""The one schema of the event store, for every SQL backend.

Tables are SQLAlchemy Core definitions; each backend compiles them for its
dialect with `ddl(dialect)` and runs the statements on its own driver, so
the hot paths pay nothing for an ORM or an engine.

The global-ordering rule (PostgreSQL)
-------------------------------------
Positions come from a sequence, handed out in one order, while transactions
commit in another: a reader could see position 11 before 10 commits and move
past 10 for ever. Locking the table around every append prevents it but
serializes all writers. Instead readers follow one rule (`_SAFE_HEAD` in
`postgres.py`):

    a gap in positions just below row p may be passed only if no transaction
    is still running whose xid is below the xid that inserted p.

The append function (below) does three things in this order: it takes its
top-level xid (`pg_current_xact_id()`), takes its positions (`nextval`), and
inserts its rows inside a subtransaction, so that each row's `xmin` is a
subtransaction xid drawn *after* every position of the append.

Why this is correct. Let H hold a position g < p that is not visible yet.
H had its top-level xid before it took g; the sequence hands out values in
call order (CACHE 1), so H took g before p's writer took p, and p's writer
drew xmin(p) after that: xid(H) < xmin(p), since xids are handed out in
order too. A reader whose snapshot has every running xid >= xmin(p) (its
xmin is above xmin(p)) therefore finds H ended: g is either visible to it
or was rolled back and stays empty for ever. The reader loses nothing.

Each step matters. Had H taken g before having an xid, no snapshot would
show H running, and the rule would let readers skip g. Had p's rows been
stamped with the top-level xid, drawn before p's positions, H could hold a
larger xid than p and still be running. And a snapshot's xmax is no bound
either: it is one past the highest *completed* xid, and running xids above
it are listed nowhere.

Rows store only the low 32 bits of their xid; comparing them with the
snapshot's 64-bit xmin modulo 2**32 is exact for rows written within the
last two billion transactions, and errs on the safe side (not yet passable)
for older ones.

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

EVENTS = "eventcraft_events"
STREAMS = "eventcraft_streams"
SNAPSHOTS = "eventcraft_snapshots"
POSITION_SEQUENCE = "eventcraft_position_seq"
NOTIFY_FUNCTION = "eventcraft_notify"
NOTIFY_CHANNEL = "eventcraft_events"
"""PostgreSQL channel told of every committed append; the payload is the store's schema."""

WRONG_EXPECTED_VERSION_SQLSTATE = "EC001"
"""Raised by the PostgreSQL append function; the error's DETAIL is the actual version."""
APPEND_ONLY_SQLSTATE = "EC002"
"""Raised by the triggers that refuse updates and deletes of events."""

metadata = sa.MetaData()

position_sequence = sa.Sequence(POSITION_SEQUENCE, metadata=metadata, cache=1)
"""CACHE 1 keeps nextval in call order across sessions, which the ordering rule needs."""

_big_int = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_json = sa.Text().with_variant(postgresql.JSONB(), "postgresql")
_timestamp = sa.DateTime(timezone=True).with_variant(sa.Text(), "sqlite")
# Byte order, which for UTF-8 is code-point order: streams list in the same
# order on every backend (SQLite compares text this way already).
_name = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")

events = sa.Table(
    EVENTS,
    metadata,
    # On SQLite an INTEGER primary key is the rowid: the cheapest ordered key.
    sa.Column("position", _big_int, primary_key=True, autoincrement=False),
    sa.Column("stream_id", _name, nullable=False),
    sa.Column("version", sa.BigInteger, nullable=False),
    sa.Column("id", sa.Uuid, nullable=False),
    sa.Column("type", sa.Text, nullable=False),
    sa.Column("data", _json, nullable=False),
    sa.Column("metadata", _json, nullable=False),
    sa.Column("recorded_at", _timestamp, nullable=False),
    sa.Column("category", _name, nullable=False),
    sa.UniqueConstraint("stream_id", "version", name=f"{EVENTS}_stream_version"),
    sa.UniqueConstraint("id", name=f"{EVENTS}_id"),
)
sa.Index(f"{EVENTS}_category_position", events.c.category, events.c.position)
sa.Index(f"{EVENTS}_type_position", events.c.type, events.c.position)

streams = sa.Table(
    STREAMS,
    metadata,
    sa.Column("stream_id", _name, primary_key=True),
    sa.Column("category", _name, nullable=False),
    sa.Column("version", sa.BigInteger, nullable=False),
)
sa.Index(f"{STREAMS}_category", streams.c.category, streams.c.stream_id)

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


_POSTGRES_FUNCTIONS = [
    f"""
CREATE FUNCTION eventcraft_append(
    p_stream text, p_category text, p_expected bigint,
    p_ids uuid[], p_types text[], p_data text[], p_metadata text[]
) RETURNS bigint[] LANGUAGE plpgsql AS $$
-- p_expected: -1 for ANY, 0 for no stream, n for exactly version n.
-- Returns the stream's new version followed by the events' positions.
DECLARE
    n int := cardinality(p_ids);
    new_version bigint;
    positions bigint[];
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'eventcraft_append needs READ COMMITTED, not %',
            current_setting('transaction_isolation');
    END IF;
    -- The xid before any position: see the ordering rule in eventstore/schema.py.
    PERFORM pg_current_xact_id();
    IF p_expected < 0 THEN
        INSERT INTO {STREAMS} AS s (stream_id, category, version) VALUES (p_stream, p_category, n)
        ON CONFLICT (stream_id) DO UPDATE SET version = s.version + n
        RETURNING s.version INTO new_version;
    ELSIF p_expected = 0 THEN
        INSERT INTO {STREAMS} (stream_id, category, version) VALUES (p_stream, p_category, n)
        ON CONFLICT (stream_id) DO NOTHING
        RETURNING version INTO new_version;
    ELSE
        UPDATE {STREAMS} SET version = version + n
        WHERE stream_id = p_stream AND version = p_expected
        RETURNING version INTO new_version;
    END IF;
    IF new_version IS NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = '{WRONG_EXPECTED_VERSION_SQLSTATE}',
            MESSAGE = 'wrong expected version',
            DETAIL = coalesce((SELECT version FROM {STREAMS} WHERE stream_id = p_stream), 0);
    END IF;
    SELECT array_agg(p ORDER BY p) INTO positions
    FROM (SELECT nextval('{POSITION_SEQUENCE}') AS p FROM generate_series(1, n)) AS taken;
    -- The EXCEPTION clause makes this block a subtransaction: the rows' xmin is
    -- an xid drawn after the positions above (the ordering rule in schema.py).
    BEGIN
        INSERT INTO {EVENTS}
            (position, stream_id, version, id, type, data, metadata, recorded_at, category)
        SELECT positions[i], p_stream, new_version - n + i, p_ids[i], p_types[i],
               p_data[i]::jsonb, p_metadata[i]::jsonb, now(), p_category
        FROM generate_series(1, n) AS i;
    EXCEPTION WHEN unique_violation THEN
        RAISE;
    END;
    RETURN new_version || positions;
END
$$""",
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

# One notification per appending statement, sent when its transaction commits
# (`postgres_listener.py`). A store made before these existed gains them on open.
_POSTGRES_NOTIFY = [
    f"""
CREATE FUNCTION {NOTIFY_FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('{NOTIFY_CHANNEL}', TG_TABLE_SCHEMA);
    RETURN NULL;
END
$$""",
    f"""CREATE TRIGGER {EVENTS}_notify AFTER INSERT ON {EVENTS}
    FOR EACH STATEMENT EXECUTE FUNCTION {NOTIFY_FUNCTION}()""",
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

    `existing` names the tables (and, on PostgreSQL, `NOTIFY_FUNCTION`) the
    database holds. A store made by an older release lacks only newer
    objects: opening it adds them and leaves the rest alone.
    """
    dialect = DIALECTS[dialect_name]
    fresh = EVENTS not in existing
    statements: list[str] = []
    if dialect_name == "postgresql" and fresh:
        statements.append(str(CreateSequence(position_sequence).compile(dialect=dialect)))
    for table in metadata.sorted_tables:
        if table.name in existing:
            continue
        statements.append(str(CreateTable(table).compile(dialect=dialect)).strip())
        for index in sorted(table.indexes, key=lambda i: str(i.name)):
            statements.append(str(CreateIndex(index).compile(dialect=dialect)))
    if fresh:
        statements += _POSTGRES_FUNCTIONS if dialect_name == "postgresql" else _SQLITE_TRIGGERS
    if dialect_name == "postgresql" and NOTIFY_FUNCTION not in existing:
        statements += _POSTGRES_NOTIFY
    return statements


TABLES = frozenset(table.name for table in metadata.sorted_tables)
