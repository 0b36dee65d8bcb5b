"""The production backend: PostgreSQL through psycopg 3.

Appends, alone or grouped, are `appends.py`'s. Readers follow the ordering
rule explained in `schema.py`; `high_water.py` is that rule in SQL.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from functools import partial
from typing import Any, TypeVar

import psycopg
from psycopg.abc import Buffer

from .. import json_lines
from ..arguments import AppendCall
from ..collector import collector_paused
from ..deletion import StreamDeletion
from ..encoding import PreparedBatch
from ..errors import (
    StoreUnavailable,
)
from ..events import (
    AppendResult,
    EncodedEvent,
    EncodedRecord,
    RecordedEvent,
    StreamInfo,
    StreamState,
    encoded_events,
)
from ..json_lines import JsonLines
from ..log_status import LogStatus
from ..paging import paged
from ..port import Backend
from ..query import AppendCondition, Query, QueryResult, covered
from ..snapshot import PreparedSnapshot, Snapshot, beyond_the_stream
from ..sql import schema
from ..sql.deletion import placed_parameters
from . import copy_out, deletion, key_table_layout, keyed_indexes, privileges, tag_functions
from . import query_reads as reads
from . import schema as postgres_schema
from . import statements as sql
from .appends import Appends
from .connections import ConnectionPool, PostgresTarget
from .high_water import database_now, log_status, safe_head
from .listener import Listener
from .statements import PAGE, PART, batch_json
from .wire import (
    notify_statement,
)

__all__ = ["PAGE", "PART", "PostgresBackend", "batch_json"]

T = TypeVar("T")
R = TypeVar("R")


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
            for statement in postgres_schema.ddl(_existing(conn)):
                conn.execute(statement.encode())
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


class PostgresBackend(Backend):
    def __init__(self, target: PostgresTarget, *, group_commit: bool = True) -> None:
        self._pool = ConnectionPool(target)
        try:
            self._with_connection(partial(create_schema, schema_name=target.schema))
            self._notify = self._with_connection(notify_statement)
        except BaseException:
            self._pool.close()  # a refused open leaves no connection behind
            raise
        self._listener = Listener(self._pool)
        self._appends = Appends(self._pool, self._notify, group_commit=group_commit)

    @classmethod
    def from_url(cls, url: str, *, group_commit: bool = True) -> PostgresBackend:
        return cls(PostgresTarget.from_url(url), group_commit=group_commit)

    def append(
        self,
        stream_id: str,
        category: str,
        batch: PreparedBatch,
        expected: int | StreamState,
        condition: AppendCondition | None = None,
    ) -> AppendResult:
        return self._appends.append(AppendCall(stream_id, category, batch, expected, condition))

    def append_many(self, calls: Sequence[AppendCall]) -> list[AppendResult]:
        return self._appends.append_many(calls)

    def read_stream(
        self, stream_id: str, *, from_version: int | None, backwards: bool, limit: int | None
    ) -> Iterator[RecordedEvent]:
        plan = sql.read_stream_plan(stream_id, from_version, backwards)
        return self._pages(
            plan.query, plan.params, plan.start, plan.next_start, limit, rows=sql.recorded_page
        )

    def read_stream_encoded(self, stream_id: str, *, from_version: int) -> Iterator[EncodedEvent]:
        return self._pages(
            sql.READ_STREAM_ENCODED,
            {"stream": stream_id},
            from_version,
            sql.version_after,
            None,
            rows=encoded_events,
        )

    def read_event(self, event_id: uuid.UUID) -> RecordedEvent | None:
        def find(conn: psycopg.Connection[Any]) -> RecordedEvent | None:
            with conn.cursor(binary=True) as cur:
                rows = cur.execute(sql.EVENT_BY_ID, (event_id,)).fetchall()
            return sql.recorded_page(rows)[0] if rows else None

        return self._with_connection(find)

    def read_all(
        self,
        *,
        after: int,
        limit: int | None,
        categories: Sequence[str] | None,
        types: Sequence[str] | None,
    ) -> Iterator[RecordedEvent]:
        head = self._safe_head(after)
        query, params = sql.read_all_query(categories, types)
        return self._pages(
            query, params, after, sql.position, limit, rows=sql.recorded_page, upto=head
        )

    def count_events(
        self,
        *,
        after: int,
        until: int | None,
        categories: Sequence[str] | None,
        types: Sequence[str] | None,
        limit: int | None,
    ) -> int:
        query, params = sql.count_query(categories, types)

        def count(conn: psycopg.Connection[Any]) -> int:
            head = safe_head(conn, after)
            last = head if until is None else min(until, head)
            row = conn.execute(
                query, {**params, "start": after, "last": last, "count": limit}
            ).fetchone()
            return int(row[0]) if row else 0

        counted = self._with_connection(count)
        return counted if limit is None else min(counted, limit)

    def read_query(self, query: Query, *, after: int, limit: int | None) -> QueryResult:
        count = reads.first_count(limit)
        locked = reads.locked_params(query, after, count)
        found: list[RecordedEvent]
        if locked is None:
            head, found, start = self._safe_head(after), [], after
        else:

            def first(conn: psycopg.Connection[Any]) -> reads.LockedPage:
                with conn.cursor(binary=True) as cur:
                    cur.execute(reads.READ_LOCKED, locked)
                    with collector_paused():  # why: eventstore/collector.py
                        return reads.locked_page(cur.fetchall(), after)

            (found, head) = self._with_connection(first)
            if len(found) < count:
                return covered(found, limit, head, after)
            start = found[-1].position
        params = sql.read_query_params(query, head)
        rest = reads.rest_limit(limit, len(found))
        found += self._pages(
            sql.READ_QUERY, params, start, sql.position, rest, rows=sql.recorded_page
        )
        return covered(found, limit, head, after)

    def read_all_encoded(
        self,
        *,
        after: int,
        until: int | None,
        categories: Sequence[str] | None,
        types: Sequence[str] | None,
    ) -> Iterator[EncodedRecord]:
        for records in self._copied_spans(sql.copied_record, after, until, categories, types):
            yield from records

    def read_all_json(
        self, *, after: int, until: int | None, categories: Sequence[str] | None
    ) -> Iterator[JsonLines]:
        for lines in self._copied_spans(sql.copied_line, after, until, categories, None):
            if lines:
                yield json_lines.joined(lines)

    def _copied_spans(
        self,
        row: Callable[[Buffer], T],
        after: int,
        until: int | None,
        categories: Sequence[str] | None,
        types: Sequence[str] | None,
    ) -> Iterator[list[T]]:
        """`row` of each of the log's rows after `after`, to `until` or the head, a list a
        span copied (`statements.read_all_encoded_query`)."""
        head = self._safe_head(after)
        query, params = sql.read_all_encoded_query(categories, types)
        for span in sql.encoded_spans(params, after, until, head):
            yield self._with_connection(partial(_copied, query, span, row))

    def _safe_head(self, after: int) -> int:
        return self._with_connection(partial(safe_head, after=after))

    def high_water_mark(self) -> int:
        return self._safe_head(0)

    def now(self) -> datetime:
        return self._with_connection(database_now)

    def log_status(self) -> LogStatus:
        return self._with_connection(log_status)

    def wait_for_events(self, after: int, timeout: float) -> bool:
        # The mark above `after`, not above 0: what read_all(after=after) goes up to, and
        # a walk of the rows past `after` alone, however long the log behind it.
        return self._listener.wait(after, timeout, partial(self._safe_head, after))

    def stream_version(self, stream_id: str) -> int:
        def query(conn: psycopg.Connection[Any]) -> int:
            row = conn.execute(sql.STREAM_VERSION, (stream_id,)).fetchone()
            return int(row[0]) if row else 0

        return self._with_connection(query)

    def list_streams(
        self, *, category: str | None, after: str | None, limit: int | None
    ) -> Iterator[StreamInfo]:
        query, params = sql.list_streams_query(category, after, limit)

        def fetch(conn: psycopg.Connection[Any]) -> list[StreamInfo]:
            return [StreamInfo(*row) for row in conn.execute(query, params)]

        return iter(self._with_connection(fetch))

    def save_snapshot(self, snapshot: PreparedSnapshot) -> None:
        params = sql.snapshot_params(
            snapshot.stream_id,
            snapshot.version,
            snapshot.type,
            snapshot.schema_version,
            snapshot.data,
        )

        def save(conn: psycopg.Connection[Any]) -> int:
            row = conn.execute(sql.SAVE_SNAPSHOT, params).fetchone()
            return int(row[0]) if row else 0

        actual = self._with_connection(save, privileges.SNAPSHOTTING)
        if snapshot.version > actual:
            raise beyond_the_stream(snapshot.stream_id, snapshot.version, actual)

    def load_snapshot(self, stream_id: str) -> Snapshot | None:
        def load(conn: psycopg.Connection[Any]) -> Snapshot | None:
            row = conn.execute(sql.LOAD_SNAPSHOT, (stream_id,)).fetchone()
            return Snapshot(*row) if row else None

        return self._with_connection(load)

    def delete_stream(
        self,
        stream_id: str,
        expected: int | StreamState,
        tombstone: bool,
        deleted_at: datetime | None,
    ) -> StreamDeletion:
        params = (stream_id, sql.expected_code(expected), tombstone)

        def delete(conn: psycopg.Connection[Any]) -> StreamDeletion | None:
            try:
                if deleted_at is None:
                    row = conn.execute(deletion.DELETE, params).fetchone()
                else:
                    with conn.transaction():
                        conn.execute(deletion.DELETE, params)
                        row = conn.execute(deletion.DELETED_AT, (deleted_at, stream_id)).fetchone()
            except psycopg.DatabaseError as error:
                refused = deletion.refusal(error, stream_id, expected)
                if refused is None:
                    raise
                raise refused from error
            return deletion.deletion(row)

        deleted = self._with_connection(delete, privileges.DELETING)
        assert deleted is not None
        return deleted

    def stream_deletion(self, stream_id: str) -> StreamDeletion | None:
        def find(conn: psycopg.Connection[Any]) -> StreamDeletion | None:
            return deletion.deletion(conn.execute(deletion.DELETION, (stream_id,)).fetchone())

        return self._with_connection(find)

    def placed_deletions(self, after: int, until: int) -> list[tuple[int, StreamDeletion]]:
        def find(conn: psycopg.Connection[Any]) -> list[tuple[int, StreamDeletion]]:
            return deletion.placed(
                conn.execute(deletion.PLACED, placed_parameters(after, until)).fetchall()
            )

        return self._with_connection(find)

    def close(self) -> None:
        self._listener.close()
        self._pool.close()

    def _pages(
        self,
        query: str,
        params: dict[str, Any],
        start: int,
        next_start: Callable[[R], int],
        limit: int | None,
        *,
        rows: Callable[[list[tuple[Any, ...]]], list[R]],
        upto: int | None = None,
    ) -> Iterator[R]:
        """What `rows` makes of the rows of `query`, page by page; with `upto`, only those
        at positions up to it."""

        def fetch(key: int, count: int) -> list[R]:
            def run(conn: psycopg.Connection[Any]) -> list[R]:
                with conn.cursor(binary=True) as cur:
                    cur.execute(query, {**params, "start": key, "count": count})
                    with collector_paused():  # why: eventstore/collector.py
                        return rows(cur.fetchall())

            return sql.up_to(self._with_connection(run), upto)

        return paged(fetch, start, next_start, limit, PAGE)

    def _with_connection(
        self,
        call: Callable[[psycopg.Connection[Any]], T],
        use: privileges.Use = privileges.READING,
    ) -> T:
        """Run `call`, a `use` of the store, on a pooled connection; once more on a new one
        if the first broke.

        Every call made through here is safe to repeat: reads, and appends,
        which recognise their own retry.
        """
        for attempt in (1, 2):
            try:
                return self._pool.run(call)
            except psycopg.OperationalError as error:
                if attempt == 2:
                    raise StoreUnavailable(f"PostgreSQL event store: {error}") from error
            except psycopg.Error as error:
                raise privileges.translated(self._pool, error, use) from error
        raise AssertionError("unreachable")


def _copied(
    query: str, params: dict[str, Any], row: Callable[[Buffer], T], conn: psycopg.Connection[Any]
) -> list[T]:
    return copy_out.copied(conn, query, params, row)
