# Generated from eventstore/postgres/async_backend.py by scripts/async_to_sync.py: do not edit.
# Edit eventstore/postgres/async_backend.py, then run `make generate`.
"""The production backend: PostgreSQL through psycopg 3, as `PostgresBackend`.

Appends, alone or grouped, are `appends.py`'s. Readers follow the
ordering rule explained in `schema.py`; `high_water.py` is that rule in SQL.
A store whose URL names a read replica (`?replica=`) reads from that standby and
writes to the primary (`standby.py`; the rule on a standby: `replicas.py`).

The sync backend is generated from the async one (`scripts/async_to_sync.py`):
both run the statements of `statements.py` and decide what their answers mean
with the same functions. Beyond awaiting they differ only in the blocks the
async source marks `# ASYNC`: how a store is opened (the async one makes its
tables with the sync code, in a thread, as its `__init__` cannot await), and
when an iterator reads its head (the sync one at the call, the async one when
its first event is asked for).
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
from ..errors import EventStoreError, StoreUnavailable
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
from ..sql.deletion import placed_parameters
from ..type_counts import TypeCount, type_counts
from . import copy_out, deletion, opening, partitions, privileges, replicas
from . import query_reads as reads
from . import statements as sql
from .appends import Appends
from .connections import ConnectionPool
from .high_water import database_now, log_status, safe_head
from .listener import Listener
from .standby import ReplicaReads
from .statements import PAGE, PART, batch_json
from .target import PostgresTarget
from .wire import notify_statement

__all__ = ["PAGE", "PART", "PostgresBackend", "batch_json"]

T = TypeVar("T")
R = TypeVar("R")
Conn = psycopg.Connection[Any]


class PostgresBackend(Backend):
    target: PostgresTarget
    _pool: ConnectionPool

    def __init__(
        self,
        target: PostgresTarget,
        *,
        group_commit: bool = True,
        replica: PostgresTarget | None = None,
    ) -> None:
        self._pool = ConnectionPool(target)
        try:
            if target.partition_events is not None:  # a new partitioned store
                self._with_connection(
                    partial(
                        partitions.create,
                        schema_name=target.schema,
                        size=target.partition_events,
                    )
                )
            self._with_connection(partial(opening.create_schema, schema_name=target.schema))
            notify = self._with_connection(notify_statement)
        except BaseException:
            self._pool.close()  # a refused open leaves no connection behind
            raise
        self._opened(self._pool, notify, group_commit, replica)

    @classmethod
    def from_url(cls, url: str, *, group_commit: bool = True) -> PostgresBackend:
        url, replica = replicas.split_url(url)
        standby = None if replica is None else PostgresTarget.from_url(replica)
        return cls(PostgresTarget.from_url(url), group_commit=group_commit, replica=standby)

    def _opened(
        self,
        pool: ConnectionPool,
        notify: bytes,
        group_commit: bool,
        replica: PostgresTarget | None,
    ) -> None:
        """The store's pool, the NOTIFY its appends send, its listener and its appends; the
        standby's reads, if it has a replica."""
        self.target = pool.target
        self._pool = pool
        self._notify = notify
        self._listener = Listener(pool)
        self._appends = Appends(pool, notify, group_commit=group_commit)
        self._reads = None if replica is None else ReplicaReads(replica, pool)
        if self._reads is not None:
            self._reads.wrote()  # the open may have made the tables: read once it shows them

    def append(
        self,
        stream_id: str,
        category: str,
        batch: PreparedBatch,
        expected: int | StreamState,
        condition: AppendCondition | None = None,
    ) -> AppendResult:
        call = AppendCall(stream_id, category, batch, expected, condition)
        try:
            return self._appends.append(call)
        finally:
            self._wrote()

    def append_many(self, calls: Sequence[AppendCall]) -> list[AppendResult]:
        try:
            return self._appends.append_many(calls)
        finally:
            self._wrote()

    def _wrote(self) -> None:
        """A write of this store may have committed: reads wait until the replica shows it."""
        if self._reads is not None:
            self._reads.wrote()

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
        def find(conn: Conn) -> RecordedEvent | None:
            with conn.cursor(binary=True) as cur:
                cur.execute(sql.EVENT_BY_ID, (event_id,))
                rows = cur.fetchall()
            return sql.recorded_page(rows)[0] if rows else None

        return self._with_reader(find)

    def read_all(
        self,
        *,
        after: int,
        limit: int | None,
        categories: Sequence[str] | None,
        types: Sequence[str] | None,
    ) -> Iterator[RecordedEvent]:
        return self._read_all(after, limit, categories, types)

    def _read_all(
        self,
        after: int,
        limit: int | None,
        categories: Sequence[str] | None,
        types: Sequence[str] | None,
    ) -> Iterator[RecordedEvent]:
        """`read_all`'s events: up to the high-water mark above `after`, read first. The
        sync `read_all` returns them at once (`paging.paged`'s rows are handed out by C, no
        generator frame an event); the async one is an async generator around them."""
        pin = self._pinned()  # the mark and the pages read on one server
        head = self._safe_head(after, pin)
        query, params = sql.read_all_query(categories, types)
        return self._pages(
            query, params, after, sql.position, limit, rows=sql.recorded_page, upto=head, pin=pin
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

        def count(conn: Conn) -> int:
            head = self._head_on(conn, after)
            last = head if until is None else min(until, head)
            cursor = conn.execute(query, {**params, "start": after, "last": last, "count": limit})
            row = cursor.fetchone()
            return int(row[0]) if row else 0

        counted = self._with_reader(count)
        return counted if limit is None else min(counted, limit)

    def count_types(
        self, *, after: int, until: int | None, types: Sequence[str] | None
    ) -> list[TypeCount]:
        query, params = sql.count_types_query(types)

        def count(conn: Conn) -> list[TypeCount]:
            head = self._head_on(conn, after)
            last = head if until is None else min(until, head)
            cursor = conn.execute(query, {**params, "start": after, "last": last})
            return type_counts(cursor.fetchall())

        return self._with_reader(count)

    def read_query(self, query: Query, *, after: int, limit: int | None) -> QueryResult:
        count = reads.first_count(limit)
        # On a replica no tag lock holds writers off: the high-water mark's path, sound
        # for a condition too (every matching event up to it is final and read).
        locked = None if self._reads else reads.locked_params(query, after, count)
        found: list[RecordedEvent]
        pin = self._pinned()
        if locked is None:
            head, found, start = self._safe_head(after, pin), [], after
        else:

            def first(conn: Conn) -> reads.LockedPage:
                with conn.cursor(binary=True) as cur:
                    cur.execute(reads.READ_LOCKED, locked)
                    # The rows are in memory by now: fetchall builds them without a wait.
                    with collector_paused():  # why: eventstore/collector.py
                        return reads.locked_page(cur.fetchall(), after)

            (found, head) = self._with_connection(first)
            if len(found) < count:
                return covered(found, limit, head, after)
            start = found[-1].position
        params = sql.read_query_params(query, head)
        rest = reads.rest_limit(limit, len(found))
        pages = self._pages(
            sql.READ_QUERY, params, start, sql.position, rest, rows=sql.recorded_page, pin=pin
        )
        found += [event for event in pages]
        return covered(found, limit, head, after)

    def read_all_encoded(
        self,
        *,
        after: int,
        until: int | None,
        categories: Sequence[str] | None,
        types: Sequence[str] | None,
    ) -> Iterator[EncodedRecord]:
        # `yield from`, which an async generator cannot: no Python loop a record.
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
        pin = self._pinned()
        head = self._safe_head(after, pin)
        query, params = sql.read_all_encoded_query(categories, types)
        for span in sql.encoded_spans(params, after, until, head):
            yield self._with_reader(partial(_copied, query, span, row), pin)

    def _safe_head(self, after: int, pin: list[ConnectionPool] | None = None) -> int:
        return self._with_reader(partial(self._head_on, after=after), pin)

    def _head_on(self, conn: Conn, after: int) -> int:
        """The high-water mark above `after`, read on `conn` (the replica's, if reading there)."""
        if self._reads is None:
            return safe_head(conn, after)
        return self._reads.head(conn, after)

    def high_water_mark(self) -> int:
        return self._safe_head(0)

    def now(self) -> datetime:
        return self._with_connection(database_now)

    def log_status(self) -> LogStatus:
        if self._reads is None:
            return self._with_connection(log_status)
        lag = self._reads.lag()
        # A promoted replica holds the log now: what holds it back is for it to say.
        where = self._reads.pool if lag.promoted else None
        status = self._with_connection(log_status, pool=where)
        return status._replace(replica=lag)

    def wait_for_events(self, after: int, timeout: float) -> bool:
        # The mark above `after`, not above 0: what read_all(after=after) goes up to, and
        # a walk of the rows past `after` alone, however long the log behind it.
        return self._listener.wait(after, timeout, partial(self._waited_head, after))

    def _waited_head(self, after: int) -> int:
        """The high-water mark above `after`; on a replica, once it shows what the primary
        has past `after` (the NOTIFY that woke the waiter came from the primary)."""
        head = self._safe_head(after)
        if head > after or self._reads is None or not self._reads.replayed_past(after):
            return head
        return self._safe_head(after)

    def stream_version(self, stream_id: str) -> int:
        def query(conn: Conn) -> int:
            cursor = conn.execute(sql.STREAM_VERSION, (stream_id,))
            row = cursor.fetchone()
            return int(row[0]) if row else 0

        return self._with_reader(query)

    def list_streams(
        self, *, category: str | None, after: str | None, limit: int | None
    ) -> Iterator[StreamInfo]:
        return iter(self._list_streams(category, after, limit))

    def _list_streams(
        self, category: str | None, after: str | None, limit: int | None
    ) -> list[StreamInfo]:
        """`list_streams`' streams, read in one statement."""
        query, params = sql.list_streams_query(category, after, limit)

        def fetch(conn: Conn) -> list[StreamInfo]:
            cursor = conn.execute(query, params)
            return [StreamInfo(*row) for row in cursor.fetchall()]

        return self._with_reader(fetch)

    def _save_snapshot_statement(self) -> str:
        """The upsert of a stream's snapshot: its conflict is on the snapshots' key."""
        return sql.SAVE_SNAPSHOT

    def save_snapshot(self, snapshot: PreparedSnapshot) -> None:
        params = sql.snapshot_params(
            snapshot.stream_id,
            snapshot.version,
            snapshot.type,
            snapshot.schema_version,
            snapshot.data,
        )

        def save(conn: Conn) -> int:
            cursor = conn.execute(self._save_snapshot_statement(), params)
            row = cursor.fetchone()
            return int(row[0]) if row else 0

        try:
            actual = self._with_connection(save, privileges.SNAPSHOTTING)
        finally:
            self._wrote()
        if snapshot.version > actual:
            raise beyond_the_stream(snapshot.stream_id, snapshot.version, actual)

    def load_snapshot(self, stream_id: str) -> Snapshot | None:
        def load(conn: Conn) -> Snapshot | None:
            cursor = conn.execute(sql.LOAD_SNAPSHOT, (stream_id,))
            row = cursor.fetchone()
            return Snapshot(*row) if row else None

        return self._with_reader(load)

    def delete_stream(
        self,
        stream_id: str,
        expected: int | StreamState,
        tombstone: bool,
        deleted_at: datetime | None,
    ) -> StreamDeletion:
        params = (stream_id, sql.expected_code(expected), tombstone)

        def delete(conn: Conn) -> StreamDeletion | None:
            try:
                if deleted_at is None:
                    cursor = conn.execute(deletion.DELETE, params)
                    row = cursor.fetchone()
                else:
                    with conn.transaction():
                        conn.execute(deletion.DELETE, params)
                        cursor = conn.execute(deletion.DELETED_AT, (deleted_at, stream_id))
                        row = cursor.fetchone()
            except psycopg.DatabaseError as error:
                refused = deletion.refusal(error, stream_id, expected)
                if refused is None:
                    raise
                raise refused from error
            return deletion.deletion(row)

        try:
            deleted = self._with_connection(delete, privileges.DELETING)
        finally:
            self._wrote()
        assert deleted is not None
        return deleted

    def stream_deletion(self, stream_id: str) -> StreamDeletion | None:
        def find(conn: Conn) -> StreamDeletion | None:
            cursor = conn.execute(deletion.DELETION, (stream_id,))
            return deletion.deletion(cursor.fetchone())

        return self._with_reader(find)

    def placed_deletions(self, after: int, until: int) -> list[tuple[int, StreamDeletion]]:
        def find(conn: Conn) -> list[tuple[int, StreamDeletion]]:
            cursor = conn.execute(deletion.PLACED, placed_parameters(after, until))
            return deletion.placed(cursor.fetchall())

        return self._with_reader(find)

    def close(self) -> None:
        self._appends.close()
        self._listener.close()
        if self._reads is not None:
            self._reads.close()
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
        pin: list[ConnectionPool] | None = None,
    ) -> Iterator[R]:
        """What `rows` makes of the rows of `query`, page by page; with `upto`, only those
        at positions up to it. Every page on one server: `pin`'s, or the first page's."""
        where: list[ConnectionPool] = [] if pin is None else pin

        def fetch(key: int, count: int) -> list[R]:
            def run(conn: Conn) -> list[R]:
                with conn.cursor(binary=True) as cur:
                    cur.execute(query, {**params, "start": key, "count": count})
                    # The rows are in memory by now: fetchall builds them without a wait.
                    with collector_paused():  # why: eventstore/collector.py
                        return rows(cur.fetchall())

            if not where:
                where.extend(self._pinned())
            return sql.up_to(self._with_reader(run, where), upto)

        return paged(fetch, start, next_start, limit, PAGE)

    def _pinned(self) -> list[ConnectionPool]:
        """Where a read runs all its statements: its replica if the store has one (once the
        replica shows the store's own writes, and while it can be reached), else the
        primary. One server for a read's mark and its pages: pages read from a standby
        that has not replayed up to a mark judged on the primary would miss events."""
        return [self._pool if self._reads is None else self._reads.reader()]

    def _with_reader(self, call: Callable[[Conn], T], pin: list[ConnectionPool] | None = None) -> T:
        """Run `call`, a read, on `pin`'s server (a new pin's if None). A replica that
        cannot be reached turns the pin to the primary for the rest of the read (the
        primary holds all a standby's mark counted, and its rule holds there): readers
        make a detour, not an error."""
        where = self._pinned() if pin is None else pin
        if where[0] is self._pool or self._reads is None:
            return self._with_connection(call)
        try:
            return self._with_connection(call, pool=where[0])
        except StoreUnavailable:
            self._reads.failed()
            where[0] = self._pool
            return self._with_connection(call)

    def _with_connection(
        self,
        call: Callable[[Conn], T],
        use: privileges.Use = privileges.READING,
        *,
        pool: ConnectionPool | None = None,
    ) -> T:
        """Run `call`, a `use` of the store, on a connection of `pool` (the primary's by
        default); once more on a new one if the first broke.

        Every call made through here is safe to repeat: reads, and appends,
        which recognise their own retry.
        """
        for attempt in (1, 2):
            try:
                return (pool or self._pool).run(call)
            except psycopg.OperationalError as error:
                if attempt == 2:
                    raise StoreUnavailable(f"PostgreSQL event store: {error}") from error
            except psycopg.Error as error:
                raise self._translated(error, use) from error
        raise AssertionError("unreachable")

    def _translated(self, error: psycopg.Error, use: privileges.Use) -> EventStoreError:
        """`error`, which a `use` of the store raised, as the store raises it: a refused
        privilege as `StorePermissionDenied` naming it (`privileges.py`)."""
        return privileges.translated(self._pool, error, use)


def _copied(query: str, params: dict[str, Any], row: Callable[[Buffer], T], conn: Conn) -> list[T]:
    return copy_out.copied(conn, query, params, row)
