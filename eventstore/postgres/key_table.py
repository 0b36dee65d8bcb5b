"""The key table in PostgreSQL: `eventcraft_keys` in the store's schema, made with the
store's tables (`postgres/key_table_layout.py`), or in another database's, made when a first
key is; see `sqlite/key_table.py` for its rows.

A forget must leave the key in none of the database's files. An UPDATE
leaves the old row version in the table's file until VACUUM, and VACUUM
leaves the freed bytes in place, so the forget is followed by `VACUUM FULL`
of the key table, which writes the live rows into a new file and truncates
the old one at once. It locks the key table for that time: seals and opens
of uncached keys wait. The write-ahead log, and backups, keep the key until
they are recycled or expire: keep the keys in a database of their own
(`keys=` a URL) where those must be shorter-lived.

VACUUM FULL copies a dead row version that a snapshot still open anywhere in
the database might see, and the copy outlives that snapshot. So a forget
first waits (`snapshot_wait` seconds at most) until no transaction of the
database began before its UPDATE committed; and the UPDATE, which commits
on its own, marks its row (`erased_xid`: the erasing transaction) as owing
a rewrite, cleared only once a VACUUM FULL after that wait has run. A wait
that times out, or a VACUUM FULL that fails (cancelled, lock timeout),
leaves the mark: the erasure is pending (`erasure_pending`), a warning is
logged, and the next forget of any subject rewrites the table first.

VACUUM FULL is the key table's owner's (or, on PostgreSQL 17, a role's with
MAINTAIN on it; or the database owner's), and PostgreSQL skips a table the
role may not vacuum with a mere warning. So a forget by any other role is
refused before it erases anything (`StorePermissionDenied` naming the owner
to run it as), and a rewrite that left the table's file in place clears no
mark.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from ..arguments import redacted
from ..errors import EventStoreError, StorePermissionDenied, StoreUnavailable
from ..personal.key_table import KEYS, DataKey, KeyTable, new_key
from . import key_table_layout as layout
from .connections import ConnectionPool
from .privileges import GRANTS
from .target import PostgresTarget, session_target

T = TypeVar("T")

log = logging.getLogger("eventcraft.eventstore")

SNAPSHOT_WAIT = 10.0
"""Seconds a forget waits, by default, for older snapshots to end before it rewrites."""

# Whether a transaction that began before `%(xid)s` (an xid8) committed is still open in
# this database, or keeps its snapshot some other way: VACUUM FULL would copy the row
# versions that one erased. `age()` measures both from the same point, so it orders xids
# across wraparound; lazy VACUUMs (autovacuum) are left out, as VACUUM leaves them out.
_OLDER_SNAPSHOT = """
SELECT EXISTS (
    SELECT FROM pg_stat_activity
    WHERE datname = current_database() AND pid <> pg_backend_pid()
      AND backend_type <> 'autovacuum worker'
      AND (age(backend_xmin) >= age(xid(%(xid)s::xid8))
           OR age(backend_xid) >= age(xid(%(xid)s::xid8)))
) OR EXISTS (
    SELECT FROM pg_prepared_xacts
    WHERE database = current_database() AND age(transaction) >= age(xid(%(xid)s::xid8))
) OR EXISTS (
    SELECT FROM pg_replication_slots WHERE age(xmin) >= age(xid(%(xid)s::xid8))
)
"""


# Whether the role may VACUUM the key table (PostgreSQL's vacuum_is_permitted_for_relation),
# and UPDATE it; its owner and schema, to name them.
_MAY_FORGET = """
SELECT pg_has_role(c.relowner, 'USAGE') OR pg_has_role(d.datdba, 'USAGE') OR {maintain},
       has_table_privilege(c.oid, 'UPDATE'), pg_get_userbyid(c.relowner), n.nspname
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_database d ON d.datname = current_database()
WHERE c.oid = to_regclass(%s)
"""

_MAINTAIN = 170000
"""The server version from which the MAINTAIN privilege lets a role vacuum a table."""

# What sealing and reading need on the key table, named when the database refuses them.
_SEALING = ("sealing personal data adds its subjects' keys to", ("SELECT", "INSERT"))
_READING = ("reading personal data opens it with the keys of", ("SELECT",))

_LACKING = """
SELECT p, current_user, n.nspname FROM unnest(%s::text[]) AS p,
    pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.oid = to_regclass(%s) AND NOT has_table_privilege(c.oid, p)
"""


class PostgresKeyTable(KeyTable):
    def __init__(self, url: str, *, snapshot_wait: float = SNAPSHOT_WAIT) -> None:
        self.target = PostgresTarget.from_url(url)
        self.url = redacted(url)
        # Connections of its own, on the store's pool rules (a connection the server
        # ended while idle is not lent again), opened as first needed.
        self._pool = ConnectionPool(self.target)
        self._sessions: ConnectionPool | None = None
        """A forget's connections (VACUUM FULL runs outside a transaction, which a
        transaction pooler gives none): PostgreSQL itself, opened when first needed."""
        self._made = False
        self._upgraded = False
        self.snapshot_wait = snapshot_wait
        """Seconds a forget waits for transactions older than its erasure to end."""

    def _run(
        self,
        work: Callable[[psycopg.Connection[Any], bool], T],
        use: tuple[str, tuple[str, ...]] = _READING,
        pool: ConnectionPool | None = None,
    ) -> T:
        """`work` on a pooled connection, and once more on a new one when that one broke
        under it (the server restarted): `work`'s statements are safe to repeat, and it is
        told when it is the repeat. A refused privilege is named as `use` needs it."""
        on = self._pool if pool is None else pool
        try:
            try:
                return on.run(lambda conn: work(conn, False))
            except psycopg.OperationalError:
                return on.run(lambda conn: work(conn, True))
        except psycopg.errors.InsufficientPrivilege as error:
            raise self._denied(error, use) from error
        except psycopg.Error as error:
            raise StoreUnavailable(f"key store {self.url}: {error}") from error

    def _denied(
        self, error: psycopg.Error, use: tuple[str, tuple[str, ...]]
    ) -> StorePermissionDenied:
        """A refused privilege on the key table, named from the catalog where the table is
        there; else (making it, on its schema) in the database's words."""
        what, needs = use
        try:
            rows = self._pool.run(lambda conn: _lacking(conn, needs))
        except (psycopg.Error, EventStoreError):  # the look failed: the database's words
            rows = []
        if rows:
            _, current, schema_name = rows[0]
            remedy = "a read-only role" if use is _READING else "the application's role"
            return StorePermissionDenied(
                current,
                f"{', '.join(row[0] for row in rows)} on table {schema_name}.{KEYS}",
                f"{what} the key store {self.url}; grant it as to {remedy}: {GRANTS}",
            )
        said = error.diag.message_primary or str(error)
        role = conninfo_to_dict(self.target.conninfo).get("user") or "of the connection"
        return StorePermissionDenied(
            str(role),
            f"a privilege ({said})",
            f"the key store {self.url}: sealing personal data makes the table {KEYS} where it "
            "is missing (CREATE on its schema) and adds keys to it (INSERT), reading opens "
            f"them (SELECT), forgetting erases them (UPDATE, and its owner's VACUUM FULL): "
            f"{GRANTS}",
        )

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

        return self._run(work, _SEALING)

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
        def work(conn: psycopg.Connection[Any], _: bool) -> int:
            if not self._exists(conn):
                return 0
            self._may_forget(conn)
            self._upgrade(conn)
            with conn.transaction():
                erased = conn.execute(
                    sql.SQL(
                        "UPDATE {} SET material = NULL, forgotten_at = now(), "
                        "erased_xid = pg_current_xact_id() "
                        "WHERE subject = %s AND material IS NOT NULL"
                    ).format(self._table()),
                    (subject,),
                ).rowcount
            # Whenever a rewrite is owed: this forget's, or one an earlier forget could not
            # finish (a repeat after a broken connection finds its own mark here too).
            self._rewrite(conn)
            return erased

        return self._run(work, pool=self._session_pool())

    def _session_pool(self) -> ConnectionPool:
        """The pool of a forget's connections: the store's own but behind a transaction
        pooler, where the URL's `direct=` (`UnsupportedStoreURL` if it names none)."""
        direct = session_target(self.target, "forgetting personal data (VACUUM FULL)")
        if direct is self.target:
            return self._pool
        if self._sessions is None:
            self._sessions = ConnectionPool(direct)
        return self._sessions

    def _may_forget(self, conn: psycopg.Connection[Any]) -> None:
        """Refuse, before anything is erased, a forget by a role that could not rewrite the
        key table: its VACUUM FULL would be skipped, the key left in the table's file."""
        maintain = "has_table_privilege(c.oid, 'MAINTAIN')"
        query = _MAY_FORGET.format(
            maintain=maintain if conn.info.server_version >= _MAINTAIN else "false"
        )
        row = conn.execute(query, (KEYS,)).fetchone()
        if row is None:  # dropped meanwhile: the UPDATE says so
            return
        may_vacuum, may_update, owner, schema_name = row
        if may_vacuum and may_update:
            return
        table = f"{schema_name}.{KEYS}"
        if may_vacuum:
            lacking, remedy = f"UPDATE on table {table}", f"grant it as to its owner {owner!r}"
        else:
            lacking = f"ownership of table {table}"
            remedy = f"which only its owner may: run forget as the migration role, {owner!r}"
        raise StorePermissionDenied(
            conn.info.user,
            lacking,
            "a forget erases the subject's keys and rewrites the key table (VACUUM FULL), "
            f"{remedy} ({GRANTS}); nothing was erased",
        )

    def erasure_pending(self) -> bool:
        def work(conn: psycopg.Connection[Any], _: bool) -> bool:
            if not self._exists(conn):
                return False
            self._upgrade(conn)
            query = sql.SQL("SELECT EXISTS (SELECT FROM {} WHERE erased_xid IS NOT NULL)")
            row = conn.execute(query.format(self._table())).fetchone()
            return bool(row and row[0])

        return self._run(work)

    def _rewrite(self, conn: psycopg.Connection[Any]) -> None:
        """VACUUM FULL the key table if a forget owes it, once no snapshot could still see
        an erased row version; the marks it clears are those it waited for."""
        row = conn.execute(
            sql.SQL("SELECT max(erased_xid)::text FROM {}").format(self._table())
        ).fetchone()
        owed = row[0] if row else None
        if owed is None:
            return
        if not self._older_snapshots_end(conn, owed):
            log.warning(
                "a forget erased a key in %s, but a transaction older than the erasure is "
                "still open in its database after %s s: the key's old row version stays in "
                "the key table's file until a later forget (of any subject) rewrites it",
                self.url,
                self.snapshot_wait,
            )
            return
        before = self._file(conn)
        conn.execute(sql.SQL("VACUUM FULL {}").format(self._table()))
        if self._file(conn) == before:
            # Skipped with a warning (a role that may not vacuum it): the key is still there.
            log.warning(
                "a forget erased a key in %s, but the key table was not rewritten (its role "
                "may not VACUUM it): the key's old row version stays in its file until its "
                "owner forgets (any subject)",
                self.url,
            )
            return
        conn.execute(
            sql.SQL("UPDATE {} SET erased_xid = NULL WHERE erased_xid <= %s::xid8").format(
                self._table()
            ),
            (owed,),
        )

    def _file(self, conn: psycopg.Connection[Any]) -> int | None:
        """The key table's file: VACUUM FULL writes a new one."""
        row = conn.execute("SELECT pg_relation_filenode(to_regclass(%s))", (KEYS,)).fetchone()
        return row[0] if row else None

    def _older_snapshots_end(self, conn: psycopg.Connection[Any], xid: str) -> bool:
        """Whether every transaction older than `xid` ended within `snapshot_wait`."""
        deadline = time.monotonic() + self.snapshot_wait
        pause = 0.01
        while True:
            row = conn.execute(_OLDER_SNAPSHOT, {"xid": xid}).fetchone()
            if not (row and row[0]):
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(pause, left))  # a bounded poll: PostgreSQL cannot notify us
            pause = min(pause * 2, 0.5)

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
            self._made = layout.made(conn)
        return self._made

    def _create(self, conn: psycopg.Connection[Any]) -> None:
        if self._made:
            return
        schema_name = self.target.schema
        with conn.transaction():
            layout.lock(conn, schema_name)
            # Only where it is missing: IF NOT EXISTS alone asks for CREATE on the database.
            if schema_name is not None and not _schema_exists(conn, schema_name):
                conn.execute(
                    sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema_name))
                )
            if not layout.made(conn):
                layout.create(conn, schema_name)
        self._made = True
        self._upgraded = True

    def _upgrade(self, conn: psycopg.Connection[Any]) -> None:
        """Give a key table made before forgets marked their pending rewrite its column
        `erased_xid`. Its forgotten keys are marked as owing one: a forget then may have
        been cut short before its VACUUM FULL."""
        if self._upgraded:
            return
        column = "SELECT EXISTS (SELECT FROM pg_attribute WHERE attrelid = to_regclass(%s) "
        column += "AND attname = 'erased_xid' AND NOT attisdropped)"
        row = conn.execute(column, (KEYS,)).fetchone()
        if not (row and row[0]):
            with conn.transaction():
                layout.lock(conn, self.target.schema)
                row = conn.execute(column, (KEYS,)).fetchone()
                if not (row and row[0]):
                    table = self._table()
                    conn.execute(sql.SQL("ALTER TABLE {} ADD COLUMN erased_xid xid8").format(table))
                    conn.execute(
                        sql.SQL(
                            "UPDATE {} SET erased_xid = pg_current_xact_id() WHERE material IS NULL"
                        ).format(table)
                    )
        self._upgraded = True

    def close(self) -> None:
        # Connections released, the table still usable: a key store given to several
        # stores is closed by each (`Shredder.close`) and connects again when used.
        closing, self._pool = self._pool, ConnectionPool(self.target)
        closing.close()
        sessions, self._sessions = self._sessions, None
        if sessions is not None:
            sessions.close()


def _lacking(conn: psycopg.Connection[Any], needs: Sequence[str]) -> list[tuple[str, str, str]]:
    """(privilege, current role, schema) of each of `needs` the role lacks on the key table;
    none when it is not there."""
    rows = conn.execute(_LACKING, (list(needs), KEYS)).fetchall()
    return [(str(p), str(role), str(schema)) for p, role, schema in rows]


def _schema_exists(conn: psycopg.Connection[Any], schema: str) -> bool:
    row = conn.execute("SELECT FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
    return row is not None
