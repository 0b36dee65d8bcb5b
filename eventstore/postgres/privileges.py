"""What the store's role must be allowed, call by call, and the error that names what a
refused call lacked.

PostgreSQL refuses a statement its role lacks a privilege for with SQLSTATE 42501
(insufficient_privilege), in words that name the object and not the privilege
("permission denied for table eventcraft_events"). The catalog knows the rest: the
`has_*_privilege` functions, which need no privilege of their own, tell which of the
privileges the call needs the role lacks. That look is made only once a call was
refused, on a connection of its own, and a look that fails leaves the database's words.

The functions the store calls are SECURITY INVOKER, PostgreSQL's default: their
statements need the caller's privileges on the tables, listed here. EXECUTE on them is
PUBLIC's unless revoked.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from ..errors import EventStoreError, StorePermissionDenied
from ..sql.deletion import DELETED_STREAMS
from ..sql.schema import EVENTS, POSITION_SEQUENCE, SNAPSHOTS, STREAMS, TABLES, TAGS
from .connections import ConnectionPool
from .partitions import KEYS
from .statements import store_error
from .target import PostgresTarget

if TYPE_CHECKING:
    from .async_connections import AsyncConnectionPool

GRANTS = "docs/reference/manual/event-store.md, 'Roles and privileges'"
"""Where the grants of each role are documented (`examples/postgres_roles.sql`)."""

_OBJECT = re.compile(r"(?:permission denied for|must be owner of) (\w+) (\S+)")


@dataclass(frozen=True)
class Use:
    """A kind of call, and the privileges it needs on the store's tables and sequence."""

    what: str
    """The call, as a message names it: "an append"."""
    needs: tuple[tuple[str, str, str], ...]
    """(kind, name, privilege): kind "table" or "sequence", name unqualified."""


def _on(kind: str, names: tuple[str, ...], *privileges: str) -> tuple[tuple[str, str, str], ...]:
    return tuple((kind, name, privilege) for name in names for privilege in privileges)


READING = Use("a read", _on("table", tuple(sorted(TABLES)), "SELECT"))
APPENDING = Use(
    "an append",
    _on("table", (EVENTS, STREAMS, DELETED_STREAMS), "SELECT")
    + _on("table", (EVENTS, TAGS, STREAMS), "INSERT")
    + _on("sequence", (POSITION_SEQUENCE,), "USAGE")
    # A partitioned store's key table (partitions.py); a store without one has no such
    # table, and what it does not have it cannot lack (`_LACKING` passes it by).
    + _on("table", (KEYS,), "SELECT", "INSERT"),
)
SNAPSHOTTING = Use(
    "saving a snapshot",
    _on("table", (EVENTS, DELETED_STREAMS, SNAPSHOTS), "SELECT")
    + _on("table", (SNAPSHOTS,), "INSERT", "UPDATE"),
)
DELETING = Use(
    "deleting a stream",
    _on("table", (EVENTS, DELETED_STREAMS), "SELECT")
    + _on("table", (DELETED_STREAMS,), "INSERT", "UPDATE"),
)


def translated(pool: ConnectionPool, error: psycopg.Error, use: Use) -> EventStoreError:
    """`error`, which a call of `use` raised, as the store raises it: a refused privilege
    as `StorePermissionDenied` naming it (looked up on a connection of `pool`), any
    other as `statements.store_error` has it."""
    if not isinstance(error, psycopg.errors.InsufficientPrivilege):
        return store_error(error)
    try:
        return pool.run(partial(denied, error=error, use=use, schema=pool.target.schema))
    except (psycopg.Error, EventStoreError):  # the look failed: the database's words
        user = conninfo_to_dict(pool.target.conninfo).get("user") or "of the connection"
        return undiagnosed(str(user), error, f"{use.what}; {_remedy(use)}")


async def translated_async(
    pool: AsyncConnectionPool, error: psycopg.Error, use: Use
) -> EventStoreError:
    """`translated` for the async store: a refused privilege looked up in a thread, on a
    connection of its own (the catalog is read by the sync functions below); any other
    error at once."""
    if not isinstance(error, psycopg.errors.InsufficientPrivilege):
        return store_error(error)
    return await asyncio.to_thread(translated_alone, pool.target, error, use)


def translated_alone(target: PostgresTarget, error: psycopg.Error, use: Use) -> EventStoreError:
    """`translated`, looked up on a connection of its own: for the async store, whose pool
    lends async connections (call it in a thread)."""
    pool = ConnectionPool(target)
    try:
        return translated(pool, error, use)
    finally:
        pool.close()


# A table the store does not have (a key table of a store not partitioned) is not lacked.
_LACKING = """
SELECT n.kind, n.name, n.privilege, current_user, current_schema()
FROM unnest(%s::text[], %s::text[], %s::text[]) AS n(kind, name, privilege)
WHERE to_regclass(n.name) IS NOT NULL AND NOT CASE n.kind
    WHEN 'table' THEN has_table_privilege(to_regclass(n.name), n.privilege)
    ELSE has_sequence_privilege(to_regclass(n.name), n.privilege) END
"""


def denied(
    conn: psycopg.Connection[Any], error: psycopg.Error, use: Use, schema: str | None
) -> StorePermissionDenied:
    """The error for `use` refused with `error` (insufficient_privilege): what it needs that
    the connection's role lacks, looked up in the catalog; the object the database named
    first. The schema's USAGE, without which its tables are not even seen, before all."""
    role, schema_name = _whoami(conn, schema)
    if schema_name is not None and not _schema_privilege(conn, schema_name, "USAGE"):
        return StorePermissionDenied(
            role, f"USAGE on schema {schema_name}", f"{use.what} needs it; {_remedy(use)}"
        )
    named = _named_object(error)
    kinds, names, privileges = zip(*use.needs, strict=True)
    rows = conn.execute(_LACKING, (list(kinds), list(names), list(privileges))).fetchall()
    lacking: dict[tuple[str, str], list[str]] = {}
    for kind, name, privilege, _, _ in rows:
        lacking.setdefault((kind, name), []).append(privilege)
    if not lacking:
        return undiagnosed(role, error, f"{use.what}; {_remedy(use)}")
    kind, name = named if named in lacking else next(iter(lacking))
    where = f"{schema_name}.{name}" if schema_name else name
    privilege = ", ".join(lacking[kind, name])
    return StorePermissionDenied(
        role, f"{privilege} on {kind} {where}", f"{use.what} needs it; {_remedy(use)}"
    )


def undiagnosed(role: str, error: psycopg.Error, detail: str) -> StorePermissionDenied:
    """The error for a call refused with `error` when the catalog does not say what it
    lacks: the database's words for it."""
    said = error.diag.message_primary or str(error)
    return StorePermissionDenied(role, f"a privilege ({said})", detail)


def _remedy(use: Use) -> str:
    if use is READING:
        return f"grant it as to a read-only role: {GRANTS}"
    return f"grant it as to the application's role, or use a role that has it: {GRANTS}"


def opening_denied(
    conn: psycopg.Connection[Any], error: psycopg.Error, schema: str | None
) -> StorePermissionDenied | None:
    """The error for an open refused while creating the store's schema or tables, or bringing
    them to this release's layout: the CREATE it lacks, on the database when the schema
    must be made, else on the schema; else, for a refused privilege, the database's
    words (an upgrade of tables another role owns). None for an `error` that was no
    refusal, and no privilege lacking (the caller raises `error` as it is)."""
    role, schema_name = _whoami(conn, schema)
    why = (
        "opening creates the store's tables, or brings them to this release's layout, where "
        "they are missing or older: open it once with a role that may, the migration role "
        f"of {GRANTS}, or grant it"
    )
    refused = isinstance(error, psycopg.errors.InsufficientPrivilege)
    if schema_name is None:
        return undiagnosed(role, error, why) if refused else None
    row = conn.execute(
        "SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = %s), "
        "has_database_privilege(current_database(), 'CREATE'), current_database()",
        (schema_name,),
    ).fetchone()
    exists, may_create, database = row if row else (True, True, "")
    if not exists and not may_create:
        return StorePermissionDenied(role, f"CREATE on database {database}", why)
    if exists and not _schema_privilege(conn, schema_name, "USAGE"):
        # Not a store to create: one the role may not see into.
        return StorePermissionDenied(
            role,
            f"USAGE on schema {schema_name}",
            f"the store's tables are in it; grant it as to a read-only role: {GRANTS}",
        )
    if exists and not _schema_privilege(conn, schema_name, "CREATE"):
        return StorePermissionDenied(role, f"CREATE on schema {schema_name}", why)
    return undiagnosed(role, error, why) if refused else None


def _whoami(conn: psycopg.Connection[Any], schema: str | None) -> tuple[str, str | None]:
    """The connection's role, and the store's schema: `schema`, or the first of the search
    path the role may use."""
    row = conn.execute("SELECT current_user, current_schema()").fetchone()
    role, current = row if row else ("", None)
    return str(role), schema if schema is not None else current


def _schema_privilege(conn: psycopg.Connection[Any], schema: str, privilege: str) -> bool:
    """Whether the role has `privilege` on `schema`; True if there is no such schema."""
    row = conn.execute(
        "SELECT has_schema_privilege(oid, %s) FROM pg_namespace WHERE nspname = %s",
        (privilege, schema),
    ).fetchone()
    return row is None or bool(row[0])


def _named_object(error: psycopg.Error) -> tuple[str, str] | None:
    """The (kind, unqualified name) the database's refusal names, if it names one."""
    found = _OBJECT.search(error.diag.message_primary or "")
    if found is None:
        return None
    return found.group(1), found.group(2).rpartition(".")[2].strip('"')
