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

import threading
from collections.abc import Callable, Collection, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg import sql

from .errors import StoreUnavailable
from .keys import DataKey, KeyTable, new_key
from .keys_sql import KEYS

T = TypeVar("T")


class PostgresKeyTable(KeyTable):
    def __init__(self, url: str) -> None:
        from .arguments import redacted
        from .postgres import PostgresTarget

        self.target = PostgresTarget.from_url(url)
        self.url = redacted(url)
        self._lock = threading.Lock()
        self._conn: psycopg.Connection[tuple[Any, ...]] | None = None
        self._made = False

    def _run(self, work: Callable[[psycopg.Connection[Any], bool], T]) -> T:
        """`work` on the table's connection, and once more on a new one when the old one
        turns out broken (the server restarted, or ended the idle connection): `work`'s
        statements are safe to repeat, and it is told when it is the repeat."""
        with self._lock:
            for again in (False, True):
                try:
                    if self._conn is None or self._conn.closed:
                        self._conn = psycopg.connect(
                            self.target.conninfo,
                            autocommit=True,
                            options=self.target.options(),
                            connect_timeout=10,
                        )
                    return work(self._conn, again)
                except psycopg.Error as error:
                    broken = self._conn is not None and self._conn.broken
                    if broken:
                        self._conn = None
                    if not (broken and not again):
                        raise StoreUnavailable(f"key store {self.url}: {error}") from error
            raise AssertionError("unreachable: the second try returns or raises")

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
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
