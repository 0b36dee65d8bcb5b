"""Opening a store on PostgreSQL: its tables and functions made where missing, and an
older layout brought up to date; for the sync and async backends alike (the async one
runs it in a thread, on connections of its own).
"""

from __future__ import annotations

from typing import Any

import psycopg

from ..sql import schema
from . import key_table_layout, keyed_indexes, privileges, tag_functions
from . import schema as postgres_schema
from .connections import ConnectionPool
from .target import PostgresTarget
from .wire import notify_statement


def prepare(target: PostgresTarget) -> bytes:
    """Open the store at `target` on a pool of its own, closed after: its schema made if
    missing (`create_schema`); the NOTIFY its appends send (`wire.notify_statement`)."""
    pool = ConnectionPool(target)
    try:
        pool.run(lambda conn: create_schema(conn, target.schema))
        return pool.run(notify_statement)
    finally:
        pool.close()


def create_schema(conn: psycopg.Connection[Any], schema_name: str | None) -> None:
    """Create the store's tables and functions in `schema_name` (None: the search path)
    where missing, and bring an older layout up to date.

    The key table of personal data is made with them, empty: the role that makes the
    store's tables (the migration role) owns it, and the application's role seals with
    INSERT on it (`key_table_layout.py`).

    A store already at this release's layout is only looked at, in the catalog: a role
    that may not create anything (one that only reads) opens it. A role that may not
    make what is missing gets `StorePermissionDenied` naming the privilege.
    """
    try:
        if (
            _schema_exists(conn, schema_name)
            and not postgres_schema.ddl(_existing(conn))
            and key_table_layout.made(conn)
        ):
            return
        with conn.transaction():
            # Processes opening the same new store at once must not race on the DDL.
            lock = "SELECT pg_advisory_xact_lock(hashtext(%s))"
            conn.execute(lock, (f"eventcraft:{schema_name}",))
            if not _schema_exists(conn, schema_name):
                # Not IF NOT EXISTS alone: that asks for CREATE on the database even when
                # the schema is there, which the schema's owner need not have.
                conn.execute(
                    psycopg.sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
                        psycopg.sql.Identifier(str(schema_name))
                    )
                )
            statements = postgres_schema.ddl(_existing(conn))
            if statements:
                # One round trip for them all (a new store's are some twenty): a quarter
                # of the time of a store's making, for a service or a test that makes
                # many (a schema per tenant). Never prepared: it is several statements.
                conn.execute(";\n".join(statements).encode(), prepare=False)
            if not key_table_layout.made(conn):
                key_table_layout.create(conn, schema_name)
    except (psycopg.errors.InsufficientPrivilege, psycopg.errors.InvalidSchemaName) as error:
        # InvalidSchemaName: a schema the role may not use is not in its search path.
        try:
            refused = privileges.opening_denied(conn, error, schema_name)
        except psycopg.Error:
            refused = privileges.undiagnosed(conn.info.user, error, "opening the store")
        if refused is None:
            raise
        raise refused from error


def _schema_exists(conn: psycopg.Connection[Any], schema_name: str | None) -> bool:
    if schema_name is None:
        return True
    row = conn.execute("SELECT FROM pg_namespace WHERE nspname = %s", (schema_name,)).fetchone()
    return row is not None


def _existing(conn: psycopg.Connection[Any]) -> frozenset[str]:
    """What the database holds of the store's layout, as `postgres_schema.ddl` takes it: catalog
    lookups, which need no privilege (a table in a schema the role may not use is not
    found)."""
    return frozenset(
        row[0]
        for row in conn.execute(
            "SELECT t FROM unnest(%s::text[]) AS t WHERE to_regclass(t) IS NOT NULL "
            "UNION ALL SELECT %s FROM pg_attribute WHERE attrelid = to_regclass(%s) "
            "AND attname = 'version' AND NOT attisdropped "
            "UNION ALL SELECT %s FROM pg_proc WHERE oid = "
            "to_regprocedure('eventcraft_append(text, text, bigint, text)') "
            "AND prosrc LIKE ALL(%s) "
            "UNION ALL SELECT %s FROM pg_proc WHERE oid = to_regprocedure(%s) "
            "AND prosrc LIKE %s "
            "UNION ALL SELECT %s FROM pg_attribute WHERE attrelid = to_regclass(%s) "
            "AND attname = 'tags' AND NOT attisdropped "
            "UNION ALL SELECT %s FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang "
            "WHERE p.oid = to_regprocedure('eventcraft_stream_version(text)') "
            "AND l.lanname = 'plpgsql' "
            "UNION ALL SELECT %s FROM pg_proc WHERE oid = "
            "to_regprocedure('eventcraft_query_positions(jsonb, bigint, bigint, bigint)') "
            "AND prosrc LIKE %s",
            (
                [*sorted(schema.TABLES), *keyed_indexes.INDEXES, schema.STREAMS_CATEGORY_INDEX],
                schema.EARLIER_LAYOUT,
                schema.STREAMS,
                schema.APPEND_IS_CURRENT,
                [f"%{mark}%" for mark in schema.APPEND_CURRENT_MARKS],
                schema.APPEND_GROUP,
                schema.APPEND_GROUP_SIGNATURE,
                f"%{schema.APPEND_GROUP_MARK}%",
                schema.TAGGED,
                schema.EVENTS,
                schema.PLANS_KEPT,
                schema.QUERY_IN_ONE,
                f"%{tag_functions.LATERAL_MARK}%",
            ),
        )
    )
