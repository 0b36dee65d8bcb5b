"""The production backend: PostgreSQL through psycopg 3, as `AsyncPostgresBackend`.

Appends, alone or grouped, are `async_appends.py`'s. Readers follow the
ordering rule explained in `schema.py`; `high_water.py` is that rule in SQL.
A store whose URL names a read replica (`?replica=`) reads from that standby and
writes to the primary (`async_standby.py`; the rule on a standby: `replicas.py`).

The sync backend is generated from the async one (`scripts/async_to_sync.py`):
both run the statements of `statements.py` and decide what their answers mean
with the same functions. Beyond awaiting they differ only in the blocks the
async source marks `# ASYNC`: how a store is opened (the async one makes its
tables with the sync code, in a thread, as its `__init__` cannot await), and
when an iterator reads its head (the sync one at the call, the async one when
its first event is asked for).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import datetime
from functools import partial
from typing import Any, TypeVar

import psycopg
from psycopg.abc import Buffer

from .. import json_lines
from ..arguments import AppendCall
from ..async_port import AsyncBackend
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
from ..paging import paged_async
from ..query import AppendCondition, Query, QueryResult, covered
from ..snapshot import PreparedSnapshot, Snapshot, beyond_the_stream
from ..sql.deletion import placed_parameters
from ..type_counts import TypeCount, type_counts
from . import copy_out, deletion, opening, partitions, privileges, replicas
from . import query_reads as reads
from . import statements as sql
from .async_appends import AsyncAppends
from .async_connections import AsyncConnectionPool
from .async_listener import AsyncListener
from .async_standby import AsyncReplicaReads
from .high_water import database_now_async, log_status_async, safe_head_async
from .statements import PAGE, PART, batch_json
from .target import PostgresTarget
from .wire import notify_statement

__all__ = ["PAGE", "PART", "AsyncPostgresBackend", "batch_json"]

T = TypeVar("T")
R = TypeVar("R")
Conn = psycopg.AsyncConnection[Any]


class AsyncPostgresBackend(AsyncBackend):
    target: PostgresTarget
    _pool: AsyncConnectionPool

    if True:  # ASYNC

        def __init__(
            self,
            target: PostgresTarget,
            pool: AsyncConnectionPool,
            notify: bytes,
            *,
            group_commit: bool = True,
            replica: PostgresTarget | None = None,
        ) -> None:
            self._opened(pool, notify, group_commit, replica)

        @classmethod
        async def open(cls, url: str, *, group_commit: bool = True) -> AsyncPostgresBackend:
            url, replica = replicas.split_url(url)
            target = PostgresTarget.from_url(url)
            standby = None if replica is None else PostgresTarget.from_url(replica)
            # The tables are made by the sync code, in a thread, on a connection of its own.
            await asyncio.to_thread(partitions.prepare, target)  # a new partitioned store
            notify = await asyncio.to_thread(opening.prepare, target)
            pool = AsyncConnectionPool(target)
            return cls(target, pool, notify, group_commit=group_commit, replica=standby)

    else:

        def __init__(
            self,
            target: PostgresTarget,
            *,
            group_commit: bool = True,
            replica: PostgresTarget | None = None,
        ) -> None:
            self._pool = AsyncConnectionPool(target)
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
        def from_url(cls, url: str, *, group_commit: bool = True) -> AsyncPostgresBackend:
            url, replica = replicas.split_url(url)
            standby = None if replica is None else PostgresTarget.from_url(replica)
            return cls(PostgresTarget.from_url(url), group_commit=group_commit, replica=standby)

    def _opened(
        self,
        pool: AsyncConnectionPool,
        notify: bytes,
        group_commit: bool,
        replica: PostgresTarget | None,
    ) -> None:
        """The store's pool, the NOTIFY its appends send, its listener and its appends; the
        standby's reads, if it has a replica."""
        self.target = pool.target
        self._pool = pool
        self._notify = notify
        self._listener = AsyncListener(pool)
        self._appends = AsyncAppends(pool, notify, group_commit=group_commit)
        self._reads = None if replica is None else AsyncReplicaReads(replica, pool)
        if self._reads is not None:
            self._reads.wrote()  # the open may have made the tables: read once it shows them

    async def append(
        self,
        stream_id: str,
        category: str,
        batch: PreparedBatch,
        expected: int | StreamState,
        condition: AppendCondition | None = None,
    ) -> AppendResult:
        call = AppendCall(stream_id, category, batch, expected, condition)
        try:
            return await self._appends.append(call)
        finally:
            self._wrote()

    async def append_many(self, calls: Sequence[AppendCall]) -> list[AppendResult]:
        try:
            return await self._appends.append_many(calls)
        finally:
            self._wrote()

    def _wrote(self) -> None:
        """A write of this store may have committed: reads wait until the replica shows it."""
        if self._reads is not None:
            self._reads.wrote()

    def read_stream(
        self, stream_id: str, *, from_version: int | None, backwards: bool, limit: int | None
    ) -> AsyncIterator[RecordedEvent]:
        plan = sql.read_stream_plan(stream_id, from_version, backwards)
        return self._pages(
            plan.query, plan.params, plan.start, plan.next_start, limit, rows=sql.recorded_page
        )

    def read_stream_encoded(
        self, stream_id: str, *, from_version: int
    ) -> AsyncIterator[EncodedEvent]:
        return self._pages(
            sql.READ_STREAM_ENCODED,
            {"stream": stream_id},
            from_version,
            sql.version_after,
            None,
            rows=encoded_events,
        )

    async def read_event(self, event_id: uuid.UUID) -> RecordedEvent | None:
        async def find(conn: Conn) -> RecordedEvent | None:
            async with conn.cursor(binary=True) as cur:
                await cur.execute(sql.EVENT_BY_ID, (event_id,))
                rows = await cur.fetchall()
            return sql.recorded_page(rows)[0] if rows else None

        return await self._with_reader(find)

    if True:  # ASYNC

        async def read_all(
            self,
            *,
            after: int,
            limit: int | None,
            categories: Sequence[str] | None,
            types: Sequence[str] | None,
        ) -> AsyncIterator[RecordedEvent]:
            async for event in await self._read_all(after, limit, categories, types):
                yield event

    else:

        def read_all(
            self,
            *,
            after: int,
            limit: int | None,
            categories: Sequence[str] | None,
            types: Sequence[str] | None,
        ) -> AsyncIterator[RecordedEvent]:
            return self._read_all(after, limit, categories, types)

    async def _read_all(
        self,
        after: int,
        limit: int | None,
        categories: Sequence[str] | None,
        types: Sequence[str] | None,
    ) -> AsyncIterator[RecordedEvent]:
        """`read_all`'s events: up to the high-water mark above `after`, read first. The
        sync `read_all` returns them at once (`paging.paged`'s rows are handed out by C, no
        generator frame an event); the async one is an async generator around them."""
        pin = await self._pinned()  # the mark and the pages read on one server
        head = await self._safe_head(after, pin)
        query, params = sql.read_all_query(categories, types)
        return self._pages(
            query, params, after, sql.position, limit, rows=sql.recorded_page, upto=head, pin=pin
        )

    async def count_events(
        self,
        *,
        after: int,
        until: int | None,
        categories: Sequence[str] | None,
        types: Sequence[str] | None,
        limit: int | None,
    ) -> int:
        query, params = sql.count_query(categories, types)

        async def count(conn: Conn) -> int:
            head = await self._head_on(conn, after)
            last = head if until is None else min(until, head)
            cursor = await conn.execute(
                query, {**params, "start": after, "last": last, "count": limit}
            )
            row = await cursor.fetchone()
            return int(row[0]) if row else 0

        counted = await self._with_reader(count)
        return counted if limit is None else min(counted, limit)

    async def count_types(
        self, *, after: int, until: int | None, types: Sequence[str] | None
    ) -> list[TypeCount]:
        query, params = sql.count_types_query(types)

        async def count(conn: Conn) -> list[TypeCount]:
            head = await self._head_on(conn, after)
            last = head if until is None else min(until, head)
            cursor = await conn.execute(query, {**params, "start": after, "last": last})
            return type_counts(await cursor.fetchall())

        return await self._with_reader(count)

    async def read_query(self, query: Query, *, after: int, limit: int | None) -> QueryResult:
        count = reads.first_count(limit)
        # On a replica no tag lock holds writers off: the high-water mark's path, sound
        # for a condition too (every matching event up to it is final and read).
        locked = None if self._reads else reads.locked_params(query, after, count)
        found: list[RecordedEvent]
        pin = await self._pinned()
        if locked is None:
            head, found, start = await self._safe_head(after, pin), [], after
        else:

            async def first(conn: Conn) -> reads.LockedPage:
                async with conn.cursor(binary=True) as cur:
                    await cur.execute(reads.READ_LOCKED, locked)
                    # The rows are in memory by now: fetchall builds them without a wait.
                    with collector_paused():  # why: eventstore/collector.py
                        return reads.locked_page(await cur.fetchall(), after)

            (found, head) = await self._with_connection(first)
            if len(found) < count:
                return covered(found, limit, head, after)
            start = found[-1].position
        params = sql.read_query_params(query, head)
        rest = reads.rest_limit(limit, len(found))
        pages = self._pages(
            sql.READ_QUERY, params, start, sql.position, rest, rows=sql.recorded_page, pin=pin
        )
        found += [event async for event in pages]
        return covered(found, limit, head, after)

    if True:  # ASYNC

        async def read_all_encoded(
            self,
            *,
            after: int,
            until: int | None,
            categories: Sequence[str] | None,
            types: Sequence[str] | None,
        ) -> AsyncIterator[EncodedRecord]:
            spans = self._copied_spans(sql.copied_record, after, until, categories, types)
            async for records in spans:
                for record in records:
                    yield record

    else:

        def read_all_encoded(
            self,
            *,
            after: int,
            until: int | None,
            categories: Sequence[str] | None,
            types: Sequence[str] | None,
        ) -> AsyncIterator[EncodedRecord]:
            # `yield from`, which an async generator cannot: no Python loop a record.
            for records in self._copied_spans(sql.copied_record, after, until, categories, types):
                yield from records

    async def read_all_json(
        self, *, after: int, until: int | None, categories: Sequence[str] | None
    ) -> AsyncIterator[JsonLines]:
        async for lines in self._copied_spans(sql.copied_line, after, until, categories, None):
            if lines:
                yield json_lines.joined(lines)

    async def _copied_spans(
        self,
        row: Callable[[Buffer], T],
        after: int,
        until: int | None,
        categories: Sequence[str] | None,
        types: Sequence[str] | None,
    ) -> AsyncIterator[list[T]]:
        """`row` of each of the log's rows after `after`, to `until` or the head, a list a
        span copied (`statements.read_all_encoded_query`)."""
        pin = await self._pinned()
        head = await self._safe_head(after, pin)
        query, params = sql.read_all_encoded_query(categories, types)
        for span in sql.encoded_spans(params, after, until, head):
            yield await self._with_reader(partial(_copied, query, span, row), pin)

    async def _safe_head(self, after: int, pin: list[AsyncConnectionPool] | None = None) -> int:
        return await self._with_reader(partial(self._head_on, after=after), pin)

    async def _head_on(self, conn: Conn, after: int) -> int:
        """The high-water mark above `after`, read on `conn` (the replica's, if reading there)."""
        if self._reads is None:
            return await safe_head_async(conn, after)
        return await self._reads.head(conn, after)

    async def high_water_mark(self) -> int:
        return await self._safe_head(0)

    async def now(self) -> datetime:
        return await self._with_connection(database_now_async)

    async def log_status(self) -> LogStatus:
        if self._reads is None:
            return await self._with_connection(log_status_async)
        lag = await self._reads.lag()
        # A promoted replica holds the log now: what holds it back is for it to say.
        where = self._reads.pool if lag.promoted else None
        status = await self._with_connection(log_status_async, pool=where)
        return status._replace(replica=lag)

    async def wait_for_events(self, after: int, timeout: float) -> bool:
        # The mark above `after`, not above 0: what read_all(after=after) goes up to, and
        # a walk of the rows past `after` alone, however long the log behind it.
        return await self._listener.wait(after, timeout, partial(self._waited_head, after))

    async def _waited_head(self, after: int) -> int:
        """The high-water mark above `after`; on a replica, once it shows what the primary
        has past `after` (the NOTIFY that woke the waiter came from the primary)."""
        head = await self._safe_head(after)
        if head > after or self._reads is None or not await self._reads.replayed_past(after):
            return head
        return await self._safe_head(after)

    async def stream_version(self, stream_id: str) -> int:
        async def query(conn: Conn) -> int:
            cursor = await conn.execute(sql.STREAM_VERSION, (stream_id,))
            row = await cursor.fetchone()
            return int(row[0]) if row else 0

        return await self._with_reader(query)

    if True:  # ASYNC

        async def list_streams(
            self, *, category: str | None, after: str | None, limit: int | None
        ) -> AsyncIterator[StreamInfo]:
            for info in await self._list_streams(category, after, limit):
                yield info

    else:

        def list_streams(
            self, *, category: str | None, after: str | None, limit: int | None
        ) -> AsyncIterator[StreamInfo]:
            return iter(self._list_streams(category, after, limit))

    async def _list_streams(
        self, category: str | None, after: str | None, limit: int | None
    ) -> list[StreamInfo]:
        """`list_streams`' streams, read in one statement."""
        query, params = sql.list_streams_query(category, after, limit)

        async def fetch(conn: Conn) -> list[StreamInfo]:
            cursor = await conn.execute(query, params)
            return [StreamInfo(*row) for row in await cursor.fetchall()]

        return await self._with_reader(fetch)

    def _save_snapshot_statement(self) -> str:
        """The upsert of a stream's snapshot: its conflict is on the snapshots' key."""
        return sql.SAVE_SNAPSHOT

    async def save_snapshot(self, snapshot: PreparedSnapshot) -> None:
        params = sql.snapshot_params(
            snapshot.stream_id,
            snapshot.version,
            snapshot.type,
            snapshot.schema_version,
            snapshot.data,
        )

        async def save(conn: Conn) -> int:
            cursor = await conn.execute(self._save_snapshot_statement(), params)
            row = await cursor.fetchone()
            return int(row[0]) if row else 0

        try:
            actual = await self._with_connection(save, privileges.SNAPSHOTTING)
        finally:
            self._wrote()
        if snapshot.version > actual:
            raise beyond_the_stream(snapshot.stream_id, snapshot.version, actual)

    async def load_snapshot(self, stream_id: str) -> Snapshot | None:
        async def load(conn: Conn) -> Snapshot | None:
            cursor = await conn.execute(sql.LOAD_SNAPSHOT, (stream_id,))
            row = await cursor.fetchone()
            return Snapshot(*row) if row else None

        return await self._with_reader(load)

    async def delete_stream(
        self,
        stream_id: str,
        expected: int | StreamState,
        tombstone: bool,
        deleted_at: datetime | None,
    ) -> StreamDeletion:
        params = (stream_id, sql.expected_code(expected), tombstone)

        async def delete(conn: Conn) -> StreamDeletion | None:
            try:
                if deleted_at is None:
                    cursor = await conn.execute(deletion.DELETE, params)
                    row = await cursor.fetchone()
                else:
                    async with conn.transaction():
                        await conn.execute(deletion.DELETE, params)
                        cursor = await conn.execute(deletion.DELETED_AT, (deleted_at, stream_id))
                        row = await cursor.fetchone()
            except psycopg.DatabaseError as error:
                refused = deletion.refusal(error, stream_id, expected)
                if refused is None:
                    raise
                raise refused from error
            return deletion.deletion(row)

        try:
            deleted = await self._with_connection(delete, privileges.DELETING)
        finally:
            self._wrote()
        assert deleted is not None
        return deleted

    async def stream_deletion(self, stream_id: str) -> StreamDeletion | None:
        async def find(conn: Conn) -> StreamDeletion | None:
            cursor = await conn.execute(deletion.DELETION, (stream_id,))
            return deletion.deletion(await cursor.fetchone())

        return await self._with_reader(find)

    async def placed_deletions(self, after: int, until: int) -> list[tuple[int, StreamDeletion]]:
        async def find(conn: Conn) -> list[tuple[int, StreamDeletion]]:
            cursor = await conn.execute(deletion.PLACED, placed_parameters(after, until))
            return deletion.placed(await cursor.fetchall())

        return await self._with_reader(find)

    async def close(self) -> None:
        await self._appends.close()
        await self._listener.close()
        if self._reads is not None:
            await self._reads.close()
        await self._pool.close()

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
        pin: list[AsyncConnectionPool] | None = None,
    ) -> AsyncIterator[R]:
        """What `rows` makes of the rows of `query`, page by page; with `upto`, only those
        at positions up to it. Every page on one server: `pin`'s, or the first page's."""
        where: list[AsyncConnectionPool] = [] if pin is None else pin

        async def fetch(key: int, count: int) -> list[R]:
            async def run(conn: Conn) -> list[R]:
                async with conn.cursor(binary=True) as cur:
                    await cur.execute(query, {**params, "start": key, "count": count})
                    # The rows are in memory by now: fetchall builds them without a wait.
                    with collector_paused():  # why: eventstore/collector.py
                        return rows(await cur.fetchall())

            if not where:
                where.extend(await self._pinned())
            return sql.up_to(await self._with_reader(run, where), upto)

        return paged_async(fetch, start, next_start, limit, PAGE)

    async def _pinned(self) -> list[AsyncConnectionPool]:
        """Where a read runs all its statements: its replica if the store has one (once the
        replica shows the store's own writes, and while it can be reached), else the
        primary. One server for a read's mark and its pages: pages read from a standby
        that has not replayed up to a mark judged on the primary would miss events."""
        return [self._pool if self._reads is None else await self._reads.reader()]

    async def _with_reader(
        self, call: Callable[[Conn], Awaitable[T]], pin: list[AsyncConnectionPool] | None = None
    ) -> T:
        """Run `call`, a read, on `pin`'s server (a new pin's if None). A replica that
        cannot be reached turns the pin to the primary for the rest of the read (the
        primary holds all a standby's mark counted, and its rule holds there): readers
        make a detour, not an error."""
        where = await self._pinned() if pin is None else pin
        if where[0] is self._pool or self._reads is None:
            return await self._with_connection(call)
        try:
            return await self._with_connection(call, pool=where[0])
        except StoreUnavailable:
            self._reads.failed()
            where[0] = self._pool
            return await self._with_connection(call)

    async def _with_connection(
        self,
        call: Callable[[Conn], Awaitable[T]],
        use: privileges.Use = privileges.READING,
        *,
        pool: AsyncConnectionPool | None = None,
    ) -> T:
        """Run `call`, a `use` of the store, on a connection of `pool` (the primary's by
        default); once more on a new one if the first broke.

        Every call made through here is safe to repeat: reads, and appends,
        which recognise their own retry.
        """
        for attempt in (1, 2):
            try:
                return await (pool or self._pool).run(call)
            except psycopg.OperationalError as error:
                if attempt == 2:
                    raise StoreUnavailable(f"PostgreSQL event store: {error}") from error
            except psycopg.Error as error:
                raise await self._translated(error, use) from error
        raise AssertionError("unreachable")

    async def _translated(self, error: psycopg.Error, use: privileges.Use) -> EventStoreError:
        """`error`, which a `use` of the store raised, as the store raises it: a refused
        privilege as `StorePermissionDenied` naming it (`privileges.py`)."""
        return await privileges.translated_async(self._pool, error, use)


async def _copied(
    query: str, params: dict[str, Any], row: Callable[[Buffer], T], conn: Conn
) -> list[T]:
    return await copy_out.copied_async(conn, query, params, row)
