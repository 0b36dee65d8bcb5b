"""The PostgreSQL backend for `AsyncEventStore`: psycopg's async connections.

It runs the statements of `statements.py` and the append function of
`schema.py`, as `PostgresBackend` does, and decides what their answers mean
with the same functions; only the waiting differs. An append is one call of
the function in autocommit, sent with the appends of other tasks in one
pipeline (`async_appends.py`) and followed there, after their Syncs, by one
NOTIFY for waiting readers, as on the sync store (`wire.py` says why after
the commit, never inside it); its reply is read when the connection is lent
again. A batch of more than `PART` events is several calls in one
transaction, each part's expected version the one before it ended at; its
NOTIFY goes from a task of the store's, on a connection of its own, one for
all the batches that committed while it sent the last. Notifications are
hints (`listener.py`): one lost costs a waiter at most `RECHECK`.
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
from ..idempotency import StoredId
from ..json_lines import JsonLines
from ..log_status import LogStatus
from ..paging import paged_async
from ..query import AppendCondition, Query, QueryResult, covered
from ..snapshot import PreparedSnapshot, Snapshot, beyond_the_stream
from ..sql.deletion import placed_parameters
from . import copy_out, deletion, privileges
from . import query_reads as reads
from . import statements as sql
from .append_group import Member, Refusal, lost_races, refusal_of, settled, stored_ids_param
from .async_appends import AppendQueue
from .async_connections import AsyncConnectionPool
from .async_listener import AsyncListener
from .backend import create_schema
from .connections import ConnectionPool
from .high_water import database_now_async, log_status_async, safe_head_async
from .statements import ANY_TRIES, PAGE, PART
from .tag_locks import plain
from .target import PostgresTarget
from .wire import APPEND, notify_statement

CLOSING = 30.0
"""Longest `close` waits for a NOTIFY being sent."""

T = TypeVar("T")
R = TypeVar("R")
Conn = psycopg.AsyncConnection[Any]


class AsyncPostgresBackend(AsyncBackend):
    def __init__(
        self,
        target: PostgresTarget,
        pool: AsyncConnectionPool,
        notify: bytes,
        *,
        group_commit: bool = True,
    ) -> None:
        self.target = target
        self._pool = pool
        self._notify = notify
        self._listener = AsyncListener(target)
        self._announcer: asyncio.Task[None] | None = None
        self._unannounced = False
        self._appends = AppendQueue(
            partial(pool.run, settle=False), pool.size, notify, grouped=group_commit
        )

    @classmethod
    async def open(cls, url: str, *, group_commit: bool = True) -> AsyncPostgresBackend:
        target = PostgresTarget.from_url(url)
        # The schema is made by the sync backend's own code, on a connection of its own.
        notify = await asyncio.to_thread(_prepare, target)
        pool = AsyncConnectionPool(target)
        return cls(target, pool, notify, group_commit=group_commit)

    async def append(
        self,
        stream_id: str,
        category: str,
        batch: PreparedBatch,
        expected: int | StreamState,
        condition: AppendCondition | None = None,
    ) -> AppendResult:
        call = AppendCall(stream_id, category, batch, expected, condition)
        if len(batch) > PART and plain(call):
            return await self._append_large(stream_id, category, batch, expected)
        (result,) = await self.append_many([call])
        return result

    async def append_many(self, calls: Sequence[AppendCall]) -> list[AppendResult]:
        member = tuple(calls)

        async def attempt() -> list[AppendResult]:
            for _ in range(ANY_TRIES):
                answer = await self._appends.submit(member)
                if not isinstance(answer, Refusal):
                    return answer
                outcome = await self._settled(member, answer)
                if isinstance(outcome, BaseException):
                    raise outcome
                if outcome is not None:
                    return outcome
                # Lost the race for a stream's next version at ANY: send it again.
            raise lost_races(member[0].stream_id)

        return await self._appending(member[0].stream_id, attempt)

    async def _append_large(
        self, stream_id: str, category: str, batch: PreparedBatch, expected: int | StreamState
    ) -> AppendResult:
        """A batch of more than `PART` events: several calls in one transaction, alone."""
        call = AppendCall(stream_id, category, batch, expected)
        head = sql.append_head(stream_id, category, expected)
        stream, category_text, first = head[0].decode(), head[1].decode(), int(head[2])

        async def send() -> list[str]:
            return await self._run(
                lambda conn: self._append_in_parts(conn, stream, category_text, first, batch)
            )

        async def attempt() -> AppendResult:
            for _ in range(ANY_TRIES):
                try:
                    answers = await send()
                except psycopg.OperationalError:
                    raise  # for _appending to judge
                except psycopg.DatabaseError as error:
                    refusal = refusal_of(error)
                    if refusal is None:
                        raise
                    outcome = await self._settled((call,), refusal)
                    if isinstance(outcome, BaseException):
                        raise outcome from error
                    if outcome is not None:
                        return outcome[0]
                    continue  # lost the race for the next version at ANY: read it again
                self._announce()  # the parts' transaction sent no NOTIFY of its own
                return sql.append_result(answers)
            raise lost_races(stream_id)

        return await self._appending(stream_id, attempt)

    async def _settled(
        self, member: Member, refusal: Refusal
    ) -> list[AppendResult] | EventStoreError | None:
        """`group.settled` for `member`, with the stored events of its ids read anew."""
        params = (stored_ids_param(member),)
        rows = await self._run(partial(_fetch_all, query=sql.STORED_IDS, params=params))
        return settled(member, refusal, [StoredId(*row) for row in rows])

    def _announce(self) -> None:
        """Have a NOTIFY sent for an append that committed: one for all that wait for it."""
        self._unannounced = True
        if self._announcer is None or self._announcer.done():
            self._announcer = asyncio.create_task(self._send_notifies(), name="eventcraft-notify")

    async def _send_notifies(self) -> None:
        while self._unannounced:
            self._unannounced = False  # an append committing from here on asks for another
            try:
                await self._run(lambda conn: conn.execute(self._notify))
            except (psycopg.Error, EventStoreError):
                return  # waiters look again within RECHECK

    async def _append_in_parts(
        self, conn: Conn, stream: str, category: str, expected: int, batch: PreparedBatch
    ) -> list[str]:
        answers: list[str] = []
        async with conn.transaction():
            for start in range(0, len(batch), PART):
                events = batch.encoded(start, start + PART)
                params = (
                    stream,
                    category,
                    expected,
                    sql.batch_json(events, batch.annotated).decode(),
                )
                row = await (await conn.execute(APPEND, params, prepare=True)).fetchone()
                assert row is not None
                answers.append(str(row[0]))
                expected = int(answers[-1].split(" ", 1)[0])
        return answers

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
                rows = await (await cur.execute(sql.EVENT_BY_ID, (event_id,))).fetchall()
            return sql.recorded_page(rows)[0] if rows else None

        return await self._with_connection(find)

    async def read_all(
        self,
        *,
        after: int,
        limit: int | None,
        categories: Sequence[str] | None,
        types: Sequence[str] | None,
    ) -> AsyncIterator[RecordedEvent]:
        head = await self._safe_head(after)
        query, params = sql.read_all_query(categories, types)
        async for event in self._pages(
            query, params, after, sql.position, limit, rows=sql.recorded_page, upto=head
        ):
            yield event

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
            head = await safe_head_async(conn, after)
            last = head if until is None else min(until, head)
            row = await (
                await conn.execute(query, {**params, "start": after, "last": last, "count": limit})
            ).fetchone()
            return int(row[0]) if row else 0

        counted = await self._with_connection(count)
        return counted if limit is None else min(counted, limit)

    async def read_query(self, query: Query, *, after: int, limit: int | None) -> QueryResult:
        count = reads.first_count(limit)
        locked = reads.locked_params(query, after, count)
        found: list[RecordedEvent]
        if locked is None:
            head, found, start = await self._safe_head(after), [], after
        else:

            async def first(conn: psycopg.AsyncConnection[Any]) -> reads.LockedPage:
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
            sql.READ_QUERY, params, start, sql.position, rest, rows=sql.recorded_page
        )
        found += [event async for event in pages]
        return covered(found, limit, head, after)

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
        """As `PostgresBackend._copied_spans`."""
        head = await self._safe_head(after)
        query, params = sql.read_all_encoded_query(categories, types)
        for span in sql.encoded_spans(params, after, until, head):
            yield await self._with_connection(partial(_copied, query, span, row))

    async def _safe_head(self, after: int) -> int:
        return await self._with_connection(lambda conn: safe_head_async(conn, after))

    async def high_water_mark(self) -> int:
        return await self._safe_head(0)

    async def now(self) -> datetime:
        return await self._with_connection(database_now_async)

    async def log_status(self) -> LogStatus:
        return await self._with_connection(log_status_async)

    async def wait_for_events(self, after: int, timeout: float) -> bool:
        # As PostgresBackend.wait_for_events: the mark above `after`.
        return await self._listener.wait(after, timeout, partial(self._safe_head, after))

    async def stream_version(self, stream_id: str) -> int:
        async def query(conn: Conn) -> int:
            row = await (await conn.execute(sql.STREAM_VERSION, (stream_id,))).fetchone()
            return int(row[0]) if row else 0

        return await self._with_connection(query)

    async def list_streams(
        self, *, category: str | None, after: str | None, limit: int | None
    ) -> AsyncIterator[StreamInfo]:
        query, params = sql.list_streams_query(category, after, limit)

        async def fetch(conn: Conn) -> list[StreamInfo]:
            found = await (await conn.execute(query, params)).fetchall()
            return [StreamInfo(*row) for row in found]

        for info in await self._with_connection(fetch):
            yield info

    async def save_snapshot(self, snapshot: PreparedSnapshot) -> None:
        params = sql.snapshot_params(
            snapshot.stream_id,
            snapshot.version,
            snapshot.type,
            snapshot.schema_version,
            snapshot.data,
        )

        async def save(conn: Conn) -> int:
            row = await (await conn.execute(sql.SAVE_SNAPSHOT, params)).fetchone()
            return int(row[0]) if row else 0

        actual = await self._with_connection(save, privileges.SNAPSHOTTING)
        if snapshot.version > actual:
            raise beyond_the_stream(snapshot.stream_id, snapshot.version, actual)

    async def load_snapshot(self, stream_id: str) -> Snapshot | None:
        async def load(conn: Conn) -> Snapshot | None:
            row = await (await conn.execute(sql.LOAD_SNAPSHOT, (stream_id,))).fetchone()
            return Snapshot(*row) if row else None

        return await self._with_connection(load)

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
                    row = await (await conn.execute(deletion.DELETE, params)).fetchone()
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

        deleted = await self._with_connection(delete, privileges.DELETING)
        assert deleted is not None
        return deleted

    async def stream_deletion(self, stream_id: str) -> StreamDeletion | None:
        async def find(conn: Conn) -> StreamDeletion | None:
            cursor = await conn.execute(deletion.DELETION, (stream_id,))
            return deletion.deletion(await cursor.fetchone())

        return await self._with_connection(find)

    async def placed_deletions(self, after: int, until: int) -> list[tuple[int, StreamDeletion]]:
        async def find(conn: Conn) -> list[tuple[int, StreamDeletion]]:
            cursor = await conn.execute(deletion.PLACED, placed_parameters(after, until))
            return deletion.placed(await cursor.fetchall())

        return await self._with_connection(find)

    async def close(self) -> None:
        await self._appends.close()
        if self._announcer is not None:
            await asyncio.wait([self._announcer], timeout=CLOSING)
        await self._listener.close()
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
    ) -> AsyncIterator[R]:
        async def fetch(key: int, count: int) -> list[R]:
            async def run(conn: Conn) -> list[R]:
                async with conn.cursor(binary=True) as cur:
                    await cur.execute(query, {**params, "start": key, "count": count})
                    # The rows are in memory by now: fetchall builds them without a wait.
                    with collector_paused():  # why: eventstore/collector.py
                        return rows(await cur.fetchall())

            return sql.up_to(await self._with_connection(run), upto)

        return paged_async(fetch, start, next_start, limit, PAGE)

    async def _appending(self, stream_id: str, attempt: Callable[[], Awaitable[T]]) -> T:
        """`attempt`, sent once more on a new connection if the first one broke
        (as `PostgresBackend._appending`: a resent batch recognises itself)."""
        try:
            return await attempt()
        except psycopg.OperationalError as error:
            broken = error
        except psycopg.Error as error:
            raise await self._translated(error, privileges.APPENDING) from error
        try:
            return await attempt()
        except (psycopg.OperationalError, StoreUnavailable) as again:
            raise sql.outcome_unknown(stream_id, broken, again) from broken
        except psycopg.Error as error:
            raise await self._translated(error, privileges.APPENDING) from error

    async def _with_connection(
        self, call: Callable[[Conn], Awaitable[T]], use: privileges.Use = privileges.READING
    ) -> T:
        """`call`, a `use` of the store, on a pooled connection; once more on another if
        the first broke."""
        for attempt in (1, 2):
            try:
                return await self._run(call)
            except psycopg.OperationalError as error:
                if attempt == 2:
                    raise StoreUnavailable(f"PostgreSQL event store: {error}") from error
            except psycopg.Error as error:
                raise await self._translated(error, use) from error
        raise AssertionError("unreachable")

    async def _translated(self, error: psycopg.Error, use: privileges.Use) -> EventStoreError:
        """`privileges.translated`: a refused privilege looked up (in a thread, on a
        connection of its own); any other error at once."""
        if not isinstance(error, psycopg.errors.InsufficientPrivilege):
            return sql.store_error(error)
        return await asyncio.to_thread(privileges.translated_alone, self.target, error, use)

    async def _run(self, call: Callable[[Conn], Awaitable[T]]) -> T:
        return await self._pool.run(call)


async def _fetch_all(conn: Conn, query: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    return await (await conn.execute(query, params)).fetchall()


def _prepare(target: PostgresTarget) -> bytes:
    """Create the store's schema if missing; the NOTIFY its appends send."""
    pool = ConnectionPool(target)
    try:
        pool.run(lambda conn: create_schema(conn, target.schema))
        return pool.run(notify_statement)
    finally:
        pool.close()


async def _copied(
    query: str, params: dict[str, Any], row: Callable[[Buffer], T], conn: Conn
) -> list[T]:
    return await copy_out.copied_async(conn, query, params, row)
