"""The key table in PostgreSQL: `eventcraft_keys` in the store's schema (or another
database's), made when a first key is; see `keys_sql.py` for its rows.

A forget must leave the key in none of the database's files. An UPDATE
leaves the old row version in the table's file until VACUUM, and VACUUM
leaves the freed bytes in place, so the forget is followed by `VACUUM FULL`
of the key table, which writes the live rows into a new file and truncates
the old one at once. It locks the key table for that time: seals and opens
of uncached keys wait. The write-ahead log, and backups, keep the key until
they are recycled or expire: keep the keys in a database of their own
(`keys=` a URL) where those must be shorter-lived.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg import sql

from .errors import StoreUnavailable
from .keys import DataKey, KeyTable, new_key
from .keys_sql import KEYS
from .postgres.connections import ConnectionPool

T = TypeVar("T")


class PostgresKeyTable(KeyTable):
    def __init__(self, url: str) -> None:
        from .arguments import redacted
        from .postgres import PostgresTarget

        self.target = PostgresTarget.from_url(url)
        self.url = redacted(url)
        # Connections of its own, on the store's pool rules (a connection the server
        # ended while idle is not lent again), opened as first needed.
        self._pool = ConnectionPool(self.target)
        self._made = False

    def _run(self, work: Callable[[psycopg.Connection[Any], bool], T]) -> T:
        """`work` on a pooled connection, and once more on a new one when that one broke
        under it (the server restarted): `work`'s statements are safe to repeat, and it is
        told when it is the repeat."""
        try:
            try:
                return self._pool.run(lambda conn: work(conn, False))
            except psycopg.OperationalError:
                return self._pool.run(lambda conn: work(conn, True))
        except psycopg.Error as error:
            raise StoreUnavailable(f"key store {self.url}: {error}") from error

    def _table(self) -> sql.Composable:
        return sql.Identifier(KEYS)

    def live_keys(self, subjects: Collection[str]) -> dict[str, DataKey]:
        wanted = list(subjects)

        def work(conn: psycopg.Connection[Any], _: bool) -> dict[str, DataKey]:
            found = self._live(conn, wanted) if self._exists(conn) else {}
            missing = [s for s in wanted if s not in found]
            if not missing:
                return found
            self._create(conn)
            made = [new_key(s) for s in missing]
            conn.execute(
                sql.SQL(
                    "INSERT INTO {} (key_id, subject, material) "
                    "SELECT * FROM unnest(%s::uuid[], %s::text[], %s::bytea[]) "
                    "ON CONFLICT (subject) WHERE material IS NOT NULL DO NOTHING"
                ).format(self._table()),
                ([k.id for k in made], [k.subject for k in made], [k.material for k in made]),
            )
            # Another process may have made some of them first: its keys are the ones.
            found.update(self._live(conn, missing))
            return found

        return self._run(work)

    def _live(self, conn: psycopg.Connection[Any], subjects: Sequence[str]) -> dict[str, DataKey]:
        rows = conn.execute(
            sql.SQL(
                "SELECT key_id::text, subject, material FROM {} "
                "WHERE subject = ANY(%s) AND material IS NOT NULL"
            ).format(self._table()),
            (list(subjects),),
        )
        return {subject: DataKey(key_id, subject, bytes(m)) for key_id, subject, m in rows}

    def keys(self, key_ids: Collection[str]) -> dict[str, DataKey]:
        wanted = list(key_ids)

        def work(conn: psycopg.Connection[Any], _: bool) -> dict[str, DataKey]:
            if not self._exists(conn):
                return {}
            rows = conn.execute(
                sql.SQL(
                    "SELECT key_id::text, subject, material FROM {} WHERE key_id = ANY(%s::uuid[])"
                ).format(self._table()),
                (wanted,),
            )
            return {
                key_id: DataKey(key_id, subject, bytes(m) if m is not None else None)
                for key_id, subject, m in rows
            }

        return self._run(work)

    def forget(self, subject: str) -> int:
        def work(conn: psycopg.Connection[Any], again: bool) -> int:
            if not self._exists(conn):
                return 0
            erased = conn.execute(
                sql.SQL(
                    "UPDATE {} SET material = NULL, forgotten_at = now() "
                    "WHERE subject = %s AND material IS NOT NULL"
                ).format(self._table()),
                (subject,),
            ).rowcount
            # The old row version is still in the file: rewrite the table without it. Again
            # on a repeat, whose first try may have erased the key and lost only the answer.
            if erased or again:
                conn.execute(sql.SQL("VACUUM FULL {}").format(self._table()))
            return erased

        return self._run(work)

    def of_subject(self, subject: str) -> list[DataKey]:
        def work(conn: psycopg.Connection[Any], _: bool) -> list[DataKey]:
            if not self._exists(conn):
                return []
            rows = conn.execute(
                sql.SQL(
                    "SELECT key_id::text, material FROM {} WHERE subject = %s ORDER BY created_at"
                ).format(self._table()),
                (subject,),
            )
            return [DataKey(k, subject, bytes(m) if m is not None else None) for k, m in rows]

        return self._run(work)

    def holds_keys(self) -> bool:
        def work(conn: psycopg.Connection[Any], _: bool) -> bool:
            if not self._exists(conn):
                return False
            query = sql.SQL("SELECT EXISTS (SELECT FROM {})").format(self._table())
            row = conn.execute(query).fetchone()
            return bool(row and row[0])

        return self._run(work)

    def _exists(self, conn: psycopg.Connection[Any]) -> bool:
        if not self._made:
            row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (KEYS,)).fetchone()
            self._made = bool(row and row[0])
        return self._made

    def _create(self, conn: psycopg.Connection[Any]) -> None:
        if self._made:
            return
        schema_name = self.target.schema
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"{KEYS}:{schema_name}",))
            if schema_name is not None:
                conn.execute(
                    sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema_name))
                )
            conn.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {} (key_id uuid PRIMARY KEY, "
                    "subject text NOT NULL, material bytea, "
                    "created_at timestamptz NOT NULL DEFAULT now(), forgotten_at timestamptz)"
                ).format(self._table())
            )
            conn.execute(
                sql.SQL(
                    "CREATE UNIQUE INDEX IF NOT EXISTS {} ON {} (subject) "
                    "WHERE material IS NOT NULL"
                ).format(sql.Identifier(f"{KEYS}_live"), self._table())
            )
        self._made = True

    def close(self) -> None:
        # Connections released, the table still usable: a key store given to several
        # stores is closed by each (`Shredder.close`) and connects again when used.
        closing, self._pool = self._pool, ConnectionPool(self.target)
        closing.close()
