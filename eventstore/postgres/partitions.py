"""A PostgreSQL store whose events table is partitioned by position range
(`?partition_events=N`): its tables, the key table that keeps ids and stream versions
unique across partitions, and the functions that make partitions ahead of the appends.

docs/how-to/partitioned-log.md is the design; what follows is why the SQL is right.

Unique across partitions. A unique index of a partitioned table must hold the partition
key, so neither `id` nor `(stream_id, version)` can be unique on the events table. Both
move to `eventcraft_event_keys`, one row an event, not partitioned, whose constraints
carry the names the events table's carry in a store that is not partitioned: every
caller that reads a refusal by its constraint (the append and group functions,
`append_group.settled`) reads a partitioned store's the same. An append writes its key
rows and its event rows in one subtransaction, after drawing its positions: of two
appends at one version the second waits for the first's key row and fails on it, as it
would on the events' index, and the rows' xid is drawn after their positions (the
ordering rule of `schema.py`, unchanged). A stream's version is read from the key table.

Partitions ahead. `eventcraft_partitions_for(first, last)` runs in every append, after
its positions are drawn and before its rows are written: it looks up (`to_regclass`, the
catalog cache) the partitions of the append's ranges and the one after (the spare). If
one of its own is missing, it waits for the store's partition lock and makes it; if only
the spare is, it makes it when the lock is free and otherwise goes on. So no append
writes a row for which no partition exists, and appends wait for the lock only when more
than a partition's positions were drawn since the spare was last made.

A partition is made by `eventcraft_make_partitions` (SECURITY DEFINER, owned by the
store's maker: the application's role needs no right to create tables) as CREATE TABLE
then ATTACH PARTITION, which takes SHARE UPDATE EXCLUSIVE on the events table, so
readers and appends go on meanwhile. A backend that had the events table open before
another transaction attached a partition may still hold the old list of partitions in
its cache (PostgreSQL takes in other sessions' catalog changes when it takes a lock it
does not hold yet): the maker therefore locks each partition the append needs by name,
ACCESS SHARE, which makes the backend take in every change made since (a lookup by
name that fails does so before failing) and then see the partition.

Append-only, each partition. The events table's statement triggers (no TRUNCATE; no
DELETE but a retention run's, `delete_refusal.py`) fire only for statements that name it:
each partition is given its own as it is made, and so is a replacement retention swaps
in (`partition_retention.py`, which replaces the partitions below a run's mark).
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
import sqlalchemy as sa
from sqlalchemy.schema import CreateTable

from ..sql.schema import (
    DIALECTS,
    EVENTS,
    events,
)
from . import append_functions, delete_refusal
from . import schema as postgres_schema
from .connections import ConnectionPool
from .target import PostgresTarget

KEYS = "eventcraft_event_keys"
"""The key table: one row an event, unique by id and by (stream_id, version)."""
PARTITION = f"{EVENTS}_p"
"""A partition's name is this and its number k: it holds positions [k*N, (k+1)*N)."""
PARTITION_LOCK_TAG = 0x6570
"""The high 32 bits of the partition lock's key ("ep"); the low 32 are the events table's
oid, as for the append lock."""
_PARTITION_LOCK_KEY = f"(({PARTITION_LOCK_TAG}::bigint << 32) | '{EVENTS}'::regclass::oid::bigint)"


def _events_table() -> str:
    """CREATE TABLE of the events, partitioned by position, without the unique
    constraints a partitioned table cannot keep (the key table keeps them)."""
    metadata = sa.MetaData()
    table = sa.Table(
        EVENTS,
        metadata,
        *(column._copy() for column in events.columns),
        postgresql_partition_by="RANGE (position)",
    )
    return str(CreateTable(table).compile(dialect=DIALECTS["postgresql"])).strip()


_KEYS_TABLE = f"""
CREATE TABLE {KEYS} (
    id uuid NOT NULL,
    version integer NOT NULL,
    position bigint NOT NULL,
    stream_id text COLLATE "C" NOT NULL,
    CONSTRAINT {EVENTS}_id PRIMARY KEY (id),
    CONSTRAINT {EVENTS}_stream_version UNIQUE (stream_id, version)
)"""

_EVENTS_INDEXES = [
    # What the unique constraints gave an unpartitioned store's reads: a stream's events
    # in version order, an event by id; here one index a partition.
    f"CREATE INDEX {EVENTS}_stream ON {EVENTS} (stream_id, version)",
    f"CREATE INDEX {EVENTS}_by_id ON {EVENTS} (id)",
]

_STREAM_VERSION = f"""
CREATE OR REPLACE FUNCTION eventcraft_stream_version(p_stream text) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
-- A partitioned store: from the key table (eventstore/postgres/partitions.py).
BEGIN
    RETURN (SELECT coalesce(max(version), 0) FROM {KEYS} WHERE stream_id = p_stream);
END
$$"""


_GUARDS = [
    # Statement triggers fire for the table a statement names, not for its partitions: a
    # TRUNCATE or DELETE sent to a partition is refused by the partition's own.
    f"CREATE TRIGGER {EVENTS}_no_truncate BEFORE TRUNCATE ON {{name}} "
    "FOR EACH STATEMENT EXECUTE FUNCTION eventcraft_refuse_change()",
    f"CREATE TRIGGER {EVENTS}_no_delete BEFORE DELETE ON {{name}} "
    "FOR EACH STATEMENT EXECUTE FUNCTION eventcraft_refuse_delete()",
]


def guard_partition(conn: psycopg.Connection[Any], name: str) -> None:
    """Give the new table `name`, a partition's replacement, the triggers every partition
    has: no TRUNCATE, and no DELETE but a retention run's (`delete_refusal.py`)."""
    table = psycopg.sql.Identifier(name).as_string(conn)
    for guard in _GUARDS:
        conn.execute(guard.format(name=table).encode())


def _make_partitions(size: int) -> str:
    return f"""
CREATE OR REPLACE FUNCTION eventcraft_make_partitions(p_from bigint, p_to bigint, p_wait boolean)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
-- Partitions p_from .. p_to of {size} positions each, those missing made. p_wait: wait
-- for the partition lock (an append whose own partition is missing); else give up at
-- once if another transaction holds it (the spare only). eventstore/postgres/partitions.py
DECLARE
    name text;
BEGIN
    IF p_wait THEN
        PERFORM pg_advisory_xact_lock({_PARTITION_LOCK_KEY});
    ELSIF NOT pg_try_advisory_xact_lock({_PARTITION_LOCK_KEY}) THEN
        RETURN;
    END IF;
    FOR k IN p_from .. p_to LOOP
        name := '{PARTITION}' || k;
        BEGIN
            -- By name, with a lock: the lookup takes in partitions other sessions made.
            EXECUTE format('LOCK TABLE %I IN ACCESS SHARE MODE', name);
        EXCEPTION WHEN undefined_table THEN
            EXECUTE format('CREATE TABLE %I (LIKE {EVENTS} INCLUDING DEFAULTS)', name);
            EXECUTE format(
                'ALTER TABLE {EVENTS} ATTACH PARTITION %I FOR VALUES FROM (%s) TO (%s)',
                name, k * {size}, (k + 1) * {size});
            -- Its own refusals: the events table's statement triggers are not a partition's.
            EXECUTE format('{_GUARDS[0].format(name="%I")}', name);
            EXECUTE format('{_GUARDS[1].format(name="%I")}', name);
        END;
    END LOOP;
END
$$"""


def _partitions_for(size: int) -> str:
    return f"""
CREATE OR REPLACE FUNCTION eventcraft_partitions_for(p_first bigint, p_last bigint)
RETURNS void LANGUAGE plpgsql AS $$
-- Called by every append with its positions' ends, before its rows are written.
DECLARE
    own_last bigint := p_last / {size};
BEGIN
    FOR k IN p_first / {size} .. own_last LOOP
        IF to_regclass('{PARTITION}' || k) IS NULL THEN
            PERFORM eventcraft_make_partitions(p_first / {size}, own_last + 1, true);
            RETURN;
        END IF;
    END LOOP;
    IF to_regclass('{PARTITION}' || (own_last + 1)) IS NULL THEN
        PERFORM eventcraft_make_partitions(own_last + 1, own_last + 1, false);
    END IF;
END
$$"""


KEY_STEP = f"""\
        PERFORM eventcraft_partitions_for(positions[1], positions[n]);
        -- The keys first: a version taken or an id stored fails before the events are written.
        INSERT INTO {KEYS} (id, version, position, stream_id)
        SELECT (e.event->>'id')::uuid, base + e.i, positions[e.i], p_stream
        FROM jsonb_array_elements(p_batch) WITH ORDINALITY AS e(event, i);
"""
"""What a partitioned store's append adds to an unpartitioned store's
(`append_functions.insert_events`), once its positions are drawn: the partitions of its
positions made, then its key rows, which keep ids and versions unique."""


def insert_events() -> str:
    """A partitioned store's `eventcraft_insert_events`: an unpartitioned store's, its
    versions checked in the key table and `KEY_STEP` added before the event rows."""
    return append_functions.insert_events(versions=KEYS, step=KEY_STEP)


def functions(size: int) -> list[str]:
    """The functions a partitioned store of `size` positions a partition has in place of
    (or besides) an unpartitioned store's; run after `schema.ddl`, which would make the
    others' (an upgrade of a later release too)."""
    return [
        _STREAM_VERSION,
        delete_refusal.FUNCTION,  # each partition's guard refers to it
        _make_partitions(size),
        _partitions_for(size),
        insert_events(),
    ]


def ddl(size: int) -> list[str]:
    """Every statement that makes a new store partitioned by `size` positions, in order:
    `schema.ddl`'s for a new store, its events table partitioned, the key table, the
    functions, and the first two partitions."""
    made = postgres_schema.ddl(frozenset())
    table = next(i for i, s in enumerate(made) if s.startswith(f"CREATE TABLE {EVENTS} ("))
    made[table : table + 1] = [_events_table(), *_EVENTS_INDEXES, _KEYS_TABLE]
    # The unpartitioned append functions are replaced before anything can call them.
    return [
        *made,
        *functions(size),
        "SELECT eventcraft_make_partitions(0, 1, true)",
    ]


def size_of(conn: psycopg.Connection[Any]) -> int | None:
    """The partition size of the store `conn` sees (its search_path), None if its events
    table is not partitioned (or does not exist)."""
    row = conn.execute(
        "SELECT pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i "
        "JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = to_regclass(%s) LIMIT 1",
        (EVENTS,),
    ).fetchone()
    if row is None:
        return None
    low, high = _BOUNDS.fullmatch(str(row[0])).groups()  # type: ignore[union-attr]
    return int(high) - int(low)


_BOUNDS = re.compile(r"FOR VALUES FROM \('?(\d+)'?\) TO \('?(\d+)'?\)")


def create(conn: psycopg.Connection[Any], schema_name: str | None, size: int) -> None:
    """Make the store at `schema_name` (None: the search path) partitioned by `size`
    positions if it is new: its schema if missing, and `ddl(size)`. A store whose events
    table exists is left as it is; `opening.create_schema`, run next, makes the rest (the
    key table of personal data) and finds the store's own tables made."""
    with conn.transaction():
        # The lock `opening.create_schema` takes: processes opening one new store at once.
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"eventcraft:{schema_name}",))
        if schema_name is not None:
            found = conn.execute("SELECT FROM pg_namespace WHERE nspname = %s", (schema_name,))
            if found.fetchone() is None:
                conn.execute(
                    psycopg.sql.SQL("CREATE SCHEMA {}").format(psycopg.sql.Identifier(schema_name))
                )
        made = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (EVENTS,)).fetchone()
        if made is not None and made[0]:
            return
        for statement in ddl(size):
            conn.execute(statement.encode())


def prepare(target: PostgresTarget) -> None:
    """`create` for `target`, if it asks for partitions, on a pool of its own, closed after
    (as `opening.prepare`, which runs next)."""
    if target.partition_events is None:
        return
    size = target.partition_events
    pool = ConnectionPool(target)
    try:
        pool.run(lambda conn: create(conn, target.schema, size))
    finally:
        pool.close()
