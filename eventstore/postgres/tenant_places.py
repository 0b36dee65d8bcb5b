"""A tenant's schema or database on PostgreSQL: made before its store opens, removed whole
when the tenant is dropped.

A schema is made by the store's own opening (`opening.create_schema`); a database cannot
be, since a connection needs one to connect to: it is made here first, from the
server's maintenance database (`postgres`), which needs the CREATEDB privilege.

Every statement names its schema or database with `sql.Identifier`, and the name was
checked (`tenant_places.py`: lowercase letters, digits and `_`) before it came here; the
values are parameters.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ..errors import StorePermissionDenied, StoreUnavailable
from .target import PostgresTarget

MAINTENANCE_DATABASE = "postgres"
"""The database a tenant's database is made and dropped from: every server has it."""


def schema_exists(url: str, schema: str) -> bool:
    """Whether the database of `url` holds the schema `schema`."""
    with _connection(_conninfo(url), "looking for the tenant's schema") as conn:
        found = conn.execute("SELECT FROM pg_namespace WHERE nspname = %s", (schema,))
        return found.fetchone() is not None


def schemas_named(url: str, prefix: str) -> list[str]:
    """The schemas of `url`'s database whose names begin with `prefix`, sorted."""
    with _connection(_conninfo(url), "listing the tenants' schemas") as conn:
        found = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE starts_with(nspname, %s) ORDER BY nspname",
            (prefix,),
        )
        return [str(row[0]) for row in found.fetchall()]


def drop_schema(url: str, schema: str) -> None:
    """Remove the schema `schema` and all it holds: the events, snapshots, deletions, tags,
    the key table, the retention runs and any read model kept beside them. Waits for
    transactions that use its tables to end."""
    with _connection(_conninfo(url), "dropping the tenant's schema") as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def database_exists(url: str, database: str) -> bool:
    """Whether the server of `url` holds the database `database`."""
    with _connection(_maintenance(url), "looking for the tenant's database") as conn:
        found = conn.execute("SELECT FROM pg_database WHERE datname = %s", (database,))
        return found.fetchone() is not None


def databases_named(url: str, prefix: str) -> list[str]:
    """The databases of `url`'s server whose names begin with `prefix` (templates left
    out), sorted."""
    with _connection(_maintenance(url), "listing the tenants' databases") as conn:
        found = conn.execute(
            "SELECT datname FROM pg_database WHERE NOT datistemplate "
            "AND starts_with(datname, %s) ORDER BY datname",
            (prefix,),
        )
        return [str(row[0]) for row in found.fetchall()]


def create_database(url: str, database: str) -> None:
    """Make the database `database` on the server of `url` if it is not there: the
    tenant's store makes its tables in it when it opens. Two processes making it at once
    both succeed."""
    with _connection(_maintenance(url), "making the tenant's database") as conn:
        if conn.execute("SELECT FROM pg_database WHERE datname = %s", (database,)).fetchone():
            return
        try:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
        except psycopg.errors.DuplicateDatabase:
            return  # another process made it first
        except psycopg.errors.UniqueViolation:
            return  # the same race, seen in the catalog's index
        except psycopg.errors.InsufficientPrivilege as error:
            raise StorePermissionDenied(
                _role(conn),
                "CREATEDB",
                f"making the database {database} of a tenant: grant the role CREATEDB, "
                "or make the tenants' databases beforehand",
            ) from error


def drop_database(url: str, database: str) -> None:
    """Remove the database `database` and all it holds. Refused (`StoreUnavailable`) while
    other sessions are connected to it: a drop does not end them for their owners."""
    with _connection(_maintenance(url), "dropping the tenant's database") as conn:
        try:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(database)))
        except psycopg.errors.ObjectInUse as error:
            raise StoreUnavailable(
                f"the tenant's database {database} is in use by other sessions: stop "
                f"what uses it (other processes of the tenant), then drop it again ({error})"
            ) from error
        except psycopg.errors.InsufficientPrivilege as error:
            raise StorePermissionDenied(
                _role(conn),
                f"ownership of the database {database}",
                "dropping a tenant's database: drop it with its owner or a superuser",
            ) from error


def _conninfo(url: str) -> str:
    return PostgresTarget.from_url(url).conninfo


def _maintenance(url: str) -> str:
    """The conninfo of `url`'s server, to its maintenance database."""
    return make_conninfo(_conninfo(url), dbname=MAINTENANCE_DATABASE)


def _role(conn: psycopg.Connection[Any]) -> str:
    return str(conninfo_to_dict(conn.info.dsn).get("user") or conn.info.user)


@contextmanager
def _connection(conninfo: str, doing: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection of its own in autocommit (CREATE and DROP DATABASE refuse to run in a
    transaction), closed after; the driver's errors raised as the store's."""
    try:
        conn = psycopg.connect(conninfo, autocommit=True)
    except psycopg.Error as error:
        raise StoreUnavailable(f"cannot connect to PostgreSQL {doing}: {error}") from error
    try:
        with conn:
            yield conn
    except psycopg.errors.InsufficientPrivilege as error:
        raise StorePermissionDenied(_role(conn), "a privilege", f"{doing}: {error}") from error
    except psycopg.Error as error:
        raise StoreUnavailable(f"PostgreSQL failed {doing}: {error}") from error
