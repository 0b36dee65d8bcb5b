"""PostgreSQL roles of least privilege for a test's store, made by the manual's own grants
(`examples/postgres_roles.sql`), and dropped afterwards."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import psycopg
from eventcraft.eventstore import EventStore
from psycopg import sql

from .conftest import PG_URL

ROLES_SQL = Path(__file__).resolve().parents[1] / "examples" / "postgres_roles.sql"
"""The grants the manual gives for a migration role, an application role and a reader."""

_VARIABLE = re.compile(r':"(\w+)"')


@dataclass(frozen=True)
class StoreRoles:
    """The roles of one test's store, each a LOGIN role of its own (trust auth)."""

    schema: str
    migrator: str
    """Owns the schema: opening the store as it creates the tables."""
    writer: str
    """The application's role: reads and writes, creates nothing."""
    reader: str
    """USAGE on the schema, SELECT on its tables."""

    def url(self, role: str, schema: str | None = None) -> str:
        """The store URL of `role`, in the store's schema or `schema`."""
        host = urlsplit(PG_URL).netloc.rpartition("@")[2]
        database = urlsplit(PG_URL).path
        return f"postgresql://{role}@{host}{database}?schema={schema or self.schema}"


def schema_of(url: str) -> str:
    """The `?schema=` of a test's store URL."""
    return dict(parse_qsl(urlsplit(url).query))["schema"]


def roles_sql(roles: StoreRoles, part: int) -> list[str]:
    """The statements of `examples/postgres_roles.sql`'s `part` (1: before the store's
    first open, 2: after it), its psql variables given `roles`' names."""
    names = {
        "schema": roles.schema,
        "migrator": roles.migrator,
        "writer": roles.writer,
        "reader": roles.reader,
    }
    before, marker, after = ROLES_SQL.read_text().partition("\n-- Part 2")
    assert marker, f"{ROLES_SQL} has no part 2"
    after = after.partition("\n")[2]
    text = "\n".join(
        line for line in (before, after)[part - 1].splitlines() if not line.startswith("--")
    )
    text = _VARIABLE.sub(lambda m: sql.Identifier(names[m.group(1)]).as_string(), text)
    return _statements(text)


def _statements(text: str) -> list[str]:
    """The statements of `text`, split at each `;` outside a `$$`-quoted body (a DO block's)."""
    statements: list[str] = []
    current = ""
    for index, part in enumerate(text.split("$$")):
        if index % 2:
            current += f"$${part}$$"
            continue
        first, *rest = part.split(";")
        current += first
        for piece in rest:
            statements.append(current)
            current = piece
    statements.append(current)
    return [statement.strip() for statement in statements if statement.strip()]


@contextmanager
def store_roles(schema: str, *, granted: bool = True) -> Iterator[StoreRoles]:
    """Three new roles for the store in `schema`, dropped with all they own afterwards. With
    `granted`, the manual's grants given as it says: part 1, the store made by the
    migration role's open, part 2."""
    tag = uuid.uuid4().hex[:8]
    roles = StoreRoles(schema, f"migrator_{tag}", f"writer_{tag}", f"reader_{tag}")
    names = (roles.migrator, roles.writer, roles.reader)
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        for name in names:
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name)))
        if granted:
            for statement in roles_sql(roles, 1):
                conn.execute(statement.encode())
            EventStore.open(roles.url(roles.migrator)).close()
            for statement in roles_sql(roles, 2):
                conn.execute(statement.encode())
    try:
        yield roles
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
            for name in names:
                conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
                conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))
