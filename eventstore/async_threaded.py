"""An async backend over a synchronous one: SQLite in a worker thread, memory in place.

SQLite has no non-blocking driver; its calls run, one at a time, on a thread
of the store's own, and the loop awaits them. SQLite serialises a
connection's statements anyway, so one thread costs no parallelism. The
memory backend never waits on I/O: its calls run on the loop directly.
Both are the very backends `EventStore` uses, so they cannot drift.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from functools import partial
from typing import TypeVar

from .arguments import AppendCall
from .async_port import AsyncBackend
from .deletion import StreamDeletion
from .encoding import PreparedBatch
from .errors import STORE_CLOSED, StoreUnavailable
from .events import (
    AppendResult,
    EncodedEvent,
    EncodedRecord,
    RecordedEvent,
    StreamInfo,
    StreamState,
)
from .json_lines import JsonLines
from .log_status import LogStatus
from .port import Backend
from .query import AppendCondition, Query, QueryResult
from .snapshot import PreparedSnapshot, Snapshot

T = TypeVar("T")

CHUNK = 1000
"""Events a read hands from the worker thread to the loop at a time."""


class ThreadedBackend(AsyncBackend):
    """`backend`'s calls awaited; on a worker thread unless `in_place`."""

    def __init__(self, backend: Backend, *, in_place: bool = False) -> None:
        self.backend = backend
        self._worker = (
            None if in_place else ThreadPoolExecutor(1, thread_name_prefix="eventcraft-store")
        )
        self._closed = False

    async def _run(self, call: Callable[[], T]) -> T:
        if self._closed:
            raise StoreUnavailable(STORE_CLOSED)
        if self._worker is None:
            return call()
        return await asyncio.get_running_loop().run_in_executor(self._worker, call)

    async def _drain(self, start: Callable[[], Iterator[T]]) -> AsyncIterator[T]:
        """The items of the iterator `start()` makes, taken from it on the worker."""
        iterator = await self._run(start)
        while True:
            chunk = await self._run(partial(_take, iterator))
            for item in chunk:
                yield item
            if len(chunk) < CHUNK:
                return

    async def append(
        self,
        stream_id: str,
        category: str,
        batch: PreparedBatch,
        expected: int | StreamState,
        condition: AppendCondition | None = None,
    ) -> AppendResult:
        return await self._run(
            partial(self.backend.append, stream_id, category, batch, expected, condition)
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
        return await self._run(
            partial(
                self.backend.count_events,
                after=after,
                until=until,
                categories=categories,
                types=types,
                limit=limit,
            )
        )

    async def read_query(self, query: Query, *, after: int, limit: int | None) -> QueryResult:
        return await self._run(partial(self.backend.read_query, query, after=after, limit=limit))

    async def append_many(self, calls: Sequence[AppendCall]) -> list[AppendResult]:
        return await self._run(partial(self.backend.append_many, calls))

    def read_stream(
        self, stream_id: str, *, from_version: int | None, backwards: bool, limit: int | None
    ) -> AsyncIterator[RecordedEvent]:
        return self._drain(
            partial(
                self.backend.read_stream,
                stream_id,
                from_version=from_version,
                backwards=backwards,
                limit=limit,
            )
        )

    def read_all(
        self,
        *,
        after: int,
        limit: int | None,
        categories: Sequence[str] | None,
        types: Sequence[str] | None,
    ) -> AsyncIterator[RecordedEvent]:
        return self._drain(
            partial(
                self.backend.read_all, after=after, limit=limit, categories=categories, types=types
            )
        )

    def read_all_encoded(
        self,
        *,
        after: int,
        until: int | None,
        categories: Sequence[str] | None,
        types: Sequence[str] | None,
    ) -> AsyncIterator[EncodedRecord]:
        return self._drain(
            partial(
                self.backend.read_all_encoded,
                after=after,
                until=until,
                categories=categories,
                types=types,
            )
        )

    async def read_all_json(
        self, *, after: int, until: int | None, categories: Sequence[str] | None
    ) -> AsyncIterator[JsonLines]:
        # A chunk a trip to the worker: each holds thousands of lines already.
        lines = await self._run(
            partial(self.backend.read_all_json, after=after, until=until, categories=categories)
        )
        while (chunk := await self._run(partial(next, lines, None))) is not None:
            yield chunk

    def read_stream_encoded(
        self, stream_id: str, *, from_version: int
    ) -> AsyncIterator[EncodedEvent]:
        return self._drain(
            partial(self.backend.read_stream_encoded, stream_id, from_version=from_version)
        )

    async def high_water_mark(self) -> int:
        return await self._run(self.backend.high_water_mark)

    async def read_event(self, event_id: uuid.UUID) -> RecordedEvent | None:
        return await self._run(partial(self.backend.read_event, event_id))

    async def now(self) -> datetime:
        return await self._run(self.backend.now)

    async def log_status(self) -> LogStatus:
        return await self._run(self.backend.log_status)

    async def stream_version(self, stream_id: str) -> int:
        return await self._run(partial(self.backend.stream_version, stream_id))

    def list_streams(
        self, *, category: str | None, after: str | None, limit: int | None
    ) -> AsyncIterator[StreamInfo]:
        return self._drain(
            partial(self.backend.list_streams, category=category, after=after, limit=limit)
        )

    async def save_snapshot(self, snapshot: PreparedSnapshot) -> None:
        await self._run(partial(self.backend.save_snapshot, snapshot))

    async def load_snapshot(self, stream_id: str) -> Snapshot | None:
        return await self._run(partial(self.backend.load_snapshot, stream_id))

    async def delete_stream(
        self,
        stream_id: str,
        expected: int | StreamState,
        tombstone: bool,
        deleted_at: datetime | None,
    ) -> StreamDeletion:
        return await self._run(
            partial(self.backend.delete_stream, stream_id, expected, tombstone, deleted_at)
        )

    async def stream_deletion(self, stream_id: str) -> StreamDeletion | None:
        return await self._run(partial(self.backend.stream_deletion, stream_id))

    async def placed_deletions(self, after: int, until: int) -> list[tuple[int, StreamDeletion]]:
        return await self._run(partial(self.backend.placed_deletions, after, until))

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._worker is None:
            self.backend.close()
            return
        try:
            await asyncio.get_running_loop().run_in_executor(self._worker, self.backend.close)
        finally:
            self._worker.shutdown(wait=False)


def _take(iterator: Iterator[T]) -> list[T]:
    return list(itertools.islice(iterator, CHUNK))
