"""The tables, views, row-level security and functions of tenants side by side in one
PostgreSQL schema (`side_by_side.py` reads their URL).

**Two schemas.** `shop__rows` holds the tables of a store (events, tags, streams,
snapshots, deleted streams), each with a `tenant` column leading its keys, and
`eventcraft_tenants`, a row per tenant. `shop` holds a view of each,
`WHERE tenant = current_setting('eventcraft.tenant')` (auto-updatable, `WITH CHECK
OPTION`: a row written through it is the tenant's), and the store's functions. A tenant's
store connects with `search_path` `shop` and `eventcraft.tenant` set to its id
(`side_by_side.TenantTarget`), and runs the very statements a store of its own runs
(`statements.py`, `deletion.py`, `tag_functions.py`): each reads its tenant's view, so each
carries the tenant filter, and its index scans begin with the tenant (`EXPLAIN` shows
`Index Cond: tenant = current_setting(...) AND ...`). A session without the setting reads
nothing: the views raise (the setting is unknown) or match no tenant.

**The second wall.** Every table of `shop__rows` has row-level security forced (its owner
is held to it too; superusers and `BYPASSRLS` roles alone are not): a policy shows and
takes only rows whose `tenant` is the session's `eventcraft.tenant`, so SQL that reads a
table without the filter, under the store's role, still sees one tenant's rows, and
none without the setting. `eventcraft_tenants` is not forced: its owner (the role that
made the store) lists the tenants (`known`), and other roles see their own row.

**Positions: a lock per tenant, held until commit.** Each tenant's log is 1, 2, 3, ...
with no gap. The append functions are the store's own, but for where positions come from:
the insert function takes the tenant's lock (a transaction-level advisory lock, keyed by
the schema and the tenant) and gives its n events the positions after the last one the
tenant's log holds, read once the lock is held (READ COMMITTED: a statement after the lock
sees every append that held it before, committed, and the transaction's own rows). So a
tenant's appends take positions one transaction after another, each after the one before
it committed or rolled back; a member of a group refused is rolled back with its rows, and
the next one takes the same positions: none is lost. PostgreSQL marks a transaction
committed in its snapshots before it releases its locks, so a snapshot that shows a row p
of the tenant shows every row below p: each statement sees a prefix of the tenant's log,
and the high-water mark is simply the last position it shows. No xid, no lock table, no
walk: the global rule of `schema.py` is not needed within one tenant, and would not be
enough (a sequence leaves gaps where appends roll back, which a tenant's positions must
not have).

Why not a sequence per tenant (the store's rule, per tenant)? Ten thousand tenants would be
ten thousand sequences, made by DDL on each tenant's first use, and a tenant's log would
keep the gaps of failed appends. Why not a counter row per tenant? Every append would
write a new version of one row, which a held-back vacuum horizon (any long transaction on
the server) leaves in a chain that every append and every read of the head walks: measured
on the shared test server, a group of appends took twice to four times as long on the
server as a store of its own, where the last position read from the primary key's end costs
one probe. The cost of the lock is that one tenant's appends commit one at a time: it is
held from the first position an append takes to its commit. Within a process, group commit
sends a tenant's concurrent appends in one transaction; processes appending to one tenant
at once wait for each other's commits (`benchmarks/tenancy.py` measures it). Appends of
different tenants wait for each other only when their keys' 32-bit hashes meet.

Conditions and deletions keep their arguments (`tag_functions.py`, `deletion.py`): where
those take the store's append lock exclusively, these take the tenant's lock, which holds
off every append of the tenant as the append lock did (its two-key form is apart from the
tag locks' one-key form, in `pg_locks` as in the lock manager: no tag lock is ever it).
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import replace
from typing import Any

import psycopg

from ..errors import StoreUnavailable
from ..sql.deletion import DELETED_STREAMS
from ..sql.schema import (
    APPEND_ONLY_SQLSTATE,
    EVENTS,
    LOG_LOCK_KEY,
    POSITION_SEQUENCE,
    SNAPSHOTS,
    STREAMS,
    TAGS,
)
from . import append_functions, deletion, statements, tag_functions
from .connections import ConnectionPool
from .side_by_side import TENANT_SETTING, SideBySide
from .target import PostgresTarget
from .wire import notify_statement

TENANTS = "eventcraft_tenants"
"""A row per tenant: its id, and when its store was first opened."""
TENANT_LOCK_TAG = 0x6574
"""The first key of a tenant's lock ("et"); the second is a hash of the schema and the
tenant (`pg_locks`: classid, objid, objsubid 2)."""
DROPPING = "eventcraft.dropping_tenant"
"""Set (for its transaction) by a tenant's drop to the tenant's id: its events may go."""
LAYOUT = "eventcraft tenants side by side, layout 1"
"""The comment on the views' schema: what `prepare` made there."""
KEYS_TABLE = "eventcraft_keys"
"""The key table every side-by-side tenant's keys are in (`side_by_side_keys.py`)."""

TABLES = (TENANTS, EVENTS, TAGS, STREAMS, SNAPSHOTS, DELETED_STREAMS)
"""The tables of `shop__rows`, each with a view in `shop`."""

_TENANT = f"tenant text COLLATE \"C\" NOT NULL DEFAULT current_setting('{TENANT_SETTING}')"
_SHOWN = f"tenant = current_setting('{TENANT_SETTING}')"
_POLICY = f"tenant = current_setting('{TENANT_SETTING}', true)"


def _tables(rows: str) -> list[str]:
    """The tables, their indexes and the events' append-only trigger, in `rows`."""
    r = f'"{rows}"'
    return [
        f"""CREATE TABLE {r}.{TENANTS} (
    tenant text COLLATE "C" PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now()
)""",
        # The columns of `sql/schema.py`'s events, in its order, after the tenant.
        f"""CREATE TABLE {r}.{EVENTS} (
    {_TENANT},
    position bigint NOT NULL,
    recorded_at timestamptz NOT NULL,
    id uuid NOT NULL,
    version integer NOT NULL,
    stream_id text COLLATE "C" NOT NULL,
    type text NOT NULL,
    category text COLLATE "C" NOT NULL,
    data jsonb NOT NULL,
    metadata jsonb NOT NULL,
    tags text[],
    CONSTRAINT {EVENTS}_pkey PRIMARY KEY (tenant, position),
    CONSTRAINT {EVENTS}_stream_version UNIQUE (tenant, stream_id, version),
    CONSTRAINT {EVENTS}_id UNIQUE (tenant, id)
)""",
        # By the names themselves, not by their hash as a store of its own keys them
        # (`keyed_indexes.py`): under row-level security PostgreSQL walks an index only
        # by leakproof operators, and hashtextextended is not one, so a read by type
        # would scan every tenant's rows. `keyed_indexes.matches` compares the name too.
        f"CREATE INDEX {EVENTS}_category_position ON {r}.{EVENTS} (tenant, category, position)",
        f"CREATE INDEX {EVENTS}_type_position ON {r}.{EVENTS} (tenant, type, position)",
        f"""CREATE TABLE {r}.{TAGS} (
    {_TENANT},
    tag text COLLATE "C" NOT NULL,
    position bigint NOT NULL,
    type text NOT NULL,
    PRIMARY KEY (tenant, tag, position)
)""",
        f"""CREATE TABLE {r}.{STREAMS} (
    {_TENANT},
    stream_id text COLLATE "C" NOT NULL,
    category text COLLATE "C" NOT NULL,
    PRIMARY KEY (tenant, stream_id)
)""",
        f"""CREATE TABLE {r}.{SNAPSHOTS} (
    {_TENANT},
    stream_id text COLLATE "C" NOT NULL,
    version bigint NOT NULL,
    type text NOT NULL,
    schema_version integer NOT NULL,
    data jsonb NOT NULL,
    recorded_at timestamptz NOT NULL,
    PRIMARY KEY (tenant, stream_id)
)""",
        f"""CREATE TABLE {r}.{DELETED_STREAMS} (
    {_TENANT},
    stream_id text COLLATE "C" NOT NULL,
    version bigint NOT NULL,
    tombstone boolean NOT NULL,
    deleted_at timestamptz NOT NULL,
    PRIMARY KEY (tenant, stream_id)
)""",
        f"""CREATE FUNCTION {r}.eventcraft_refuse_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- A tenant's drop removes its events, and nothing else changes one.
    IF TG_OP = 'DELETE' AND current_setting('{DROPPING}', true) = OLD.tenant THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION USING
        ERRCODE = '{APPEND_ONLY_SQLSTATE}',
        MESSAGE = format('%s is append-only: %s refused', TG_TABLE_NAME, TG_OP);
END
$$""",
        f"""CREATE TRIGGER {EVENTS}_append_only BEFORE UPDATE OR DELETE ON {r}.{EVENTS}
    FOR EACH ROW EXECUTE FUNCTION {r}.eventcraft_refuse_change()""",
        f"""CREATE TRIGGER {EVENTS}_no_truncate BEFORE TRUNCATE ON {r}.{EVENTS}
    FOR EACH STATEMENT EXECUTE FUNCTION {r}.eventcraft_refuse_change()""",
    ]


def _security(rows: str) -> list[str]:
    """Row-level security on every table of `rows`: the second wall."""
    statements = []
    for table in TABLES:
        name = f'"{rows}".{table}'
        statements += [
            f"ALTER TABLE {name} ENABLE ROW LEVEL SECURITY",
            f"CREATE POLICY eventcraft_tenant ON {name} USING ({_POLICY}) WITH CHECK ({_POLICY})",
        ]
        if table != TENANTS:  # its owner lists the tenants (`known`)
            statements.append(f"ALTER TABLE {name} FORCE ROW LEVEL SECURITY")
    return statements


def _views(schema: str, rows: str) -> list[str]:
    return [
        f'CREATE VIEW "{schema}".{table} AS SELECT * FROM "{rows}".{table} '
        f"WHERE {_SHOWN} WITH LOCAL CHECK OPTION"
        for table in TABLES
    ]


_LOCK_TENANT = (
    f"PERFORM pg_advisory_xact_lock({TENANT_LOCK_TAG}, "
    f"hashtext(current_schema() || '/' || current_setting('{TENANT_SETTING}')))"
)
"""The tenant's lock: what an append takes before its positions, and what stands for the
append lock taken exclusively (every append of the tenant waits)."""
_LAST = "eventcraft.last_position"
"""Set, for its transaction, to the last position the transaction gave its tenant's log:
the next append of the transaction (the next member of a group, the next part of a large
batch) goes on from it without asking the log again. Set in each append's subtransaction,
so a refused append's setting is rolled back with its rows."""
_TAKE_POSITIONS = "\n".join(
    [
        "    -- The tenant's lock, held until the transaction ends, then its last position,",
        "    -- in a statement of its own: its snapshot shows every append that held the lock",
        "    -- before (why: eventstore/postgres/side_by_side_layout.py). Positions follow.",
        f"    last := nullif(current_setting('{_LAST}', true), '')::bigint;",
        "    IF last IS NULL THEN",
        f"        {_LOCK_TENANT};",
        f"        last := coalesce((SELECT position FROM {EVENTS} ORDER BY position DESC",
        "            LIMIT 1), 0);",
        "    END IF;",
        f"    PERFORM set_config('{_LAST}', (last + n)::text, true);",
        "    IF n = 1 THEN",
        "        INSERT INTO",
    ]
)


def _replaced(text: str, *changes: tuple[str, str]) -> str:
    """`text` with each change made; each must be there (a function changed upstream fails
    here, at import, not in a tenant's append)."""
    for old, new in changes:
        if old not in text:
            raise AssertionError(f"side-by-side functions: {old!r} is no longer in {text[:80]!r}")
        text = text.replace(old, new)
    return text


_NEXTVAL = f"nextval('{POSITION_SEQUENCE}')"
_MANY_NEXTVAL = f"ARRAY(SELECT {_NEXTVAL} FROM generate_series(1, n))"
_SHARED_LOCK = f"PERFORM pg_advisory_xact_lock_shared({LOG_LOCK_KEY});"
_EXCLUSIVE_LOCK = f"PERFORM pg_advisory_xact_lock({LOG_LOCK_KEY});"
_NO_SHARED_LOCK = "-- Positions come under the tenant's lock: no append lock to take."
# A stream's last version and the log's last position, as one probe of the index's end:
# with the tenant's equality before them, PostgreSQL's plan for max() on tables it has no
# statistics of yet (a new store) walked every version of the stream, and kept that plan
# in the session's functions (appends slowed as streams grew).
_MAX_VERSION = f"(SELECT coalesce(max(version), 0) FROM {EVENTS} WHERE stream_id = p_stream)"
_LAST_VERSION = (
    f"coalesce((SELECT version FROM {EVENTS} WHERE stream_id = p_stream "
    "ORDER BY version DESC LIMIT 1), 0)"
)
_MAX_POSITION = (
    f"SELECT greatest(coalesce(max(e.position), 0), p_after) INTO v_head FROM {EVENTS} e;"
)
_LAST_POSITION = (
    f"v_head := greatest(coalesce((SELECT position FROM {EVENTS} ORDER BY position DESC LIMIT 1), "
    "0), p_after);"
)


@functools.cache
def functions() -> tuple[str, ...]:
    """The store's functions, made in the views' schema, where they read and write the
    views. Each is the one a store of its own has but for what `_replaced` changes:
    positions from the tenant's row, the tenant's row for the exclusive append lock, and
    ON CONFLICT keys. Made when first asked (a tenant's open), so that a change upstream
    that `_replaced` no longer finds fails side by side alone, loudly."""
    return (
        _replaced(append_functions.STREAM_VERSION, (_MAX_VERSION, _LAST_VERSION)),
        _replaced(
            append_functions.INSERT_EVENTS,
            ("    positions bigint[];\nBEGIN", "    positions bigint[];\n    last bigint;\nBEGIN"),
            ("    IF n = 1 THEN\n        INSERT INTO", _TAKE_POSITIONS),
            (_MANY_NEXTVAL, "ARRAY(SELECT generate_series(last + 1, last + n))"),
            (_NEXTVAL, "last + 1"),
            ("ON CONFLICT (stream_id) DO NOTHING", "ON CONFLICT DO NOTHING"),
        ),
        _replaced(append_functions.APPEND, (_SHARED_LOCK, _NO_SHARED_LOCK)),
        tag_functions.QUERY_POSITIONS,
        tag_functions.FIRST_MATCH,
        _replaced(tag_functions.LOCK_FOR, (_EXCLUSIVE_LOCK, f"{_LOCK_TENANT};")),
        _replaced(tag_functions.READ_LOCKED, (_MAX_POSITION, _LAST_POSITION)),
        _replaced(append_functions.APPEND_GROUP_FUNCTION, (_SHARED_LOCK, _NO_SHARED_LOCK)),
        *[
            _replaced(
                text,
                (_EXCLUSIVE_LOCK, f"{_LOCK_TENANT};"),
                ("ON CONFLICT (stream_id) DO UPDATE", "ON CONFLICT (tenant, stream_id) DO UPDATE"),
                (_MAX_VERSION, _LAST_VERSION),
            )
            if "eventcraft_delete_stream" in text
            else _replaced(text, (_MAX_VERSION, _LAST_VERSION))
            for text in deletion.ddl()[1:]  # the functions; the table is above
        ],
    )


def layout_mark() -> str:
    """The comment on the views' schema: `LAYOUT` and a digest of `functions()`, so that an
    open after a release that changed them replaces them."""
    digest = hashlib.sha256("\n".join(functions()).encode()).hexdigest()[:16]
    return f"{LAYOUT}; functions {digest}"


@functools.cache
def save_snapshot() -> str:
    """`statements.SAVE_SNAPSHOT`, its conflict on the view's key (the tenant, the stream)."""
    return _replaced(
        statements.SAVE_SNAPSHOT,
        ("ON CONFLICT (stream_id)", "ON CONFLICT (tenant, stream_id)"),
    )


HEAD = f"SELECT greatest((SELECT position FROM {EVENTS} ORDER BY position DESC LIMIT 1), %s)"
"""The high-water mark above a position: the last position the tenant's log shows (why: the
module's docstring); one probe of the primary key's end."""


def ddl(schema: str, rows: str) -> list[str]:
    """Every statement that makes the layout in the two schemas, there, in order."""
    return [
        *_tables(rows),
        *_security(rows),
        *_views(schema, rows),
        f'SET LOCAL search_path TO "{schema}"',
        *functions(),
        f"COMMENT ON SCHEMA \"{schema}\" IS '{layout_mark()}'",
    ]


def prepare(shared: SideBySide) -> bytes:
    """Make the layout if it is missing and the tenant's row if it has none, on a pool of
    its own, closed after; the NOTIFY the tenant's appends send."""
    pool = ConnectionPool(shared.target)
    try:
        pool.run(lambda conn: _prepare(conn, shared))
        return pool.run(notify_statement)
    finally:
        pool.close()


def _prepare(conn: psycopg.Connection[Any], shared: SideBySide) -> None:
    if _layout(conn, shared.schema) != layout_mark():
        with conn.transaction():
            conn.execute(
                "SELECT pg_advisory_xact_lock(hashtext(%s))", (f"eventcraft:{shared.schema}",)
            )
            found = _layout(conn, shared.schema)
            if found is None:
                _refuse_taken(conn, shared)
                for name in (shared.schema, shared.rows):
                    # Not IF NOT EXISTS alone: that asks for CREATE on the database even
                    # where the schema is there, which its owner need not have.
                    if not conn.execute(_SCHEMA, (name,)).fetchone():
                        conn.execute(f'CREATE SCHEMA "{name}"')
                conn.execute(";\n".join(ddl(shared.schema, shared.rows)).encode(), prepare=False)
            elif _made(found) and found != layout_mark():
                # Made by another release: this release's functions replace its own.
                replaced = [
                    f'SET LOCAL search_path TO "{shared.schema}"',
                    *functions(),
                    f"COMMENT ON SCHEMA \"{shared.schema}\" IS '{layout_mark()}'",
                ]
                conn.execute(";\n".join(replaced).encode(), prepare=False)
            elif not _made(found):
                raise _taken(shared, f"its comment says {found!r}")
    if shared.tenant is not None:
        conn.execute(
            f'INSERT INTO "{shared.schema}".{TENANTS} (tenant) VALUES (%s) ON CONFLICT DO NOTHING',
            (shared.tenant,),
        )


_SCHEMA = "SELECT 1 FROM pg_namespace WHERE nspname = %s"


def _made(comment: str | None) -> bool:
    """Whether a schema's comment says the layout is there (of this release or another)."""
    return comment is not None and (comment == LAYOUT or comment.startswith(f"{LAYOUT}; "))


def _layout(conn: psycopg.Connection[Any], schema: str) -> str | None:
    """The comment on `schema` (None: no schema, or no comment)."""
    row = conn.execute(
        "SELECT coalesce(obj_description(oid, 'pg_namespace'), '') FROM pg_namespace "
        "WHERE nspname = %s",
        (schema,),
    ).fetchone()
    return None if row is None or not row[0] else str(row[0])


def _refuse_taken(conn: psycopg.Connection[Any], shared: SideBySide) -> None:
    """Refuse to make the layout where a store of no tenants is (its tables would be
    hidden behind the views, or in the way of the tables)."""
    for schema in (shared.schema, shared.rows):
        row = conn.execute(
            "SELECT to_regclass(format('%%I.%%I', %s::text, %s::text)) IS NOT NULL",
            (schema, EVENTS),
        ).fetchone()
        if row and row[0]:
            raise _taken(shared, f"the schema {schema} holds an event store already")


def _taken(shared: SideBySide, why: str) -> StoreUnavailable:
    return StoreUnavailable(
        f"tenants side by side cannot be placed in the schema {shared.schema}: {why} "
        "(a store of no tenants, or of another layout); name another schema"
    )


def tenant_exists(shared: SideBySide, tenant: str) -> bool:
    """Whether `tenant` has a row (a store) side by side at `shared`."""
    target = _as_tenant(shared, tenant)
    with psycopg.connect(target.conninfo, **target.connect_arguments(), autocommit=True) as conn:
        if not _made(_layout(conn, shared.schema)):
            return False
        row = conn.execute(f'SELECT count(*) FROM "{shared.schema}".{TENANTS}').fetchone()
        return bool(row and row[0])


def known(shared: SideBySide) -> list[str]:
    """Every tenant with a row side by side at `shared`, sorted: what the role may see
    (the role that made the store sees them all; another, none but its setting's)."""
    target = shared.target
    with psycopg.connect(target.conninfo, **target.connect_arguments(), autocommit=True) as conn:
        if not _made(_layout(conn, shared.schema)):
            return []
        rows = conn.execute(f'SELECT tenant FROM "{shared.rows}".{TENANTS} ORDER BY tenant')
        return [str(row[0]) for row in rows.fetchall()]


def drop_tenant(shared: SideBySide, tenant: str) -> bool:
    """Remove every row of `tenant` (its events, tags, streams, snapshots, deletions, its
    keys, its row of tenants) in one transaction; whether it had a row."""
    target = _as_tenant(shared, tenant)
    with psycopg.connect(target.conninfo, **target.connect_arguments()) as conn:
        if not _made(_layout(conn, shared.schema)):
            return False
        r = f'"{shared.rows}"'
        conn.execute("SELECT set_config(%s, %s, true)", (DROPPING, tenant))
        # The tenant's lock first: an append of it in flight elsewhere ends before.
        conn.execute(f'SET LOCAL search_path TO "{shared.schema}"')
        conn.execute(_LOCK_TENANT.replace("PERFORM", "SELECT", 1))
        existed = conn.execute(
            f"SELECT 1 FROM {r}.{TENANTS} WHERE tenant = %s", (tenant,)
        ).fetchone()
        for table in (EVENTS, TAGS, STREAMS, SNAPSHOTS, DELETED_STREAMS, TENANTS):
            conn.execute(f"DELETE FROM {r}.{table} WHERE tenant = %s", (tenant,))
        keys = conn.execute("SELECT to_regclass(%s)", (f"{r}.{KEYS_TABLE}",)).fetchone()
        if keys and keys[0]:
            conn.execute(
                f"DELETE FROM {r}.{KEYS_TABLE} WHERE left(subject, %s) = %s",
                (len(tenant) + 1, f"{tenant}/"),
            )
        conn.commit()
        return existed is not None


def _as_tenant(shared: SideBySide, tenant: str) -> PostgresTarget:
    return replace(shared.target, tenant=tenant)
