"""The key table's layout in PostgreSQL: `eventcraft_keys` (its rows: `sqlite/key_table.py`).

A store's open makes it with the store's other tables (`postgres/backend.py`), empty,
so that the role which makes those, the migration role, owns it too: the application's
role then seals with INSERT on it and no CREATE, and a forget, which rewrites the table
and so needs its owner, runs as the migration role. A key store in a database of its
own (`keys=` a URL) makes it with its first seal (`postgres/key_table.py`).
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from ..personal.key_table import KEYS


def lock(conn: psycopg.Connection[Any], schema: str | None) -> None:
    """Hold, until the transaction ends, the lock of whoever changes the key table's layout
    in `schema`: processes opening or sealing at once must not race on its DDL."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"{KEYS}:{schema}",))


def made(conn: psycopg.Connection[Any]) -> bool:
    """Whether the key table is in the connection's schema (a catalog lookup)."""
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (KEYS,)).fetchone()
    return bool(row and row[0])


def create(conn: psycopg.Connection[Any], schema: str | None) -> None:
    """Make the key table in the connection's schema where it is missing, in the caller's
    transaction: CREATE on the schema, even where the table is there (IF NOT EXISTS is
    checked after the privilege), so callers look with `made` first."""
    lock(conn, schema)
    conn.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (key_id uuid PRIMARY KEY, "
            "subject text NOT NULL, material bytea, "
            "created_at timestamptz NOT NULL DEFAULT now(), forgotten_at timestamptz, "
            "erased_xid xid8)"
        ).format(sql.Identifier(KEYS))
    )
    conn.execute(
        sql.SQL(
            "CREATE UNIQUE INDEX IF NOT EXISTS {} ON {} (subject) WHERE material IS NOT NULL"
        ).format(sql.Identifier(f"{KEYS}_live"), sql.Identifier(KEYS))
    )
