"""A blocking face over `AsyncEventStore`, so that one suite of tests runs on both APIs.

`BlockingEventStore` has `EventStore`'s methods; each runs the async store's
coroutine on a private event loop in a thread of its own and waits for it.
Several threads calling at once have their coroutines run concurrently on
that loop: the conformance suite's waits and appends from other threads
exercise the async store's own concurrency. Arguments are checked in the
caller's thread, as the async store checks them before anything is awaited.

`BlockingEventStore.over(store)` puts the same face on a store of the
caller's, whose coroutines then run on the caller's loop: code that needs a
sync store (the projection runner's worker threads) can use an async one from
other threads, while the loop is free. Its methods must not be called on the
loop's own thread, which they would block: they raise `RuntimeError` there.

Otherwise it is a test device, not a way to use the async store from sync
code: `EventStore` is that.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import AsyncIterator, Coroutine, Iterator, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, TypeVar

from pydantic import BaseModel

from .arguments import ManyAppend
from .async_store import AsyncEventStore
from .deletion import StreamDeletion
from .encoding import MAX_EVENT_BYTES
from .events import (
    ANY,
    AppendResult,
    EncodedEvent,
    EncodedRecord,
    ExpectedVersion,
    NewEvent,
    RecordedEvent,
    StreamInfo,
)
from .json_lines import JsonLines
from .log_status import LogStatus
from .query import AppendCondition, Query, QueryResult
from .snapshot import Snapshot

T = TypeVar("T")


class BlockingEventStore:
    """`EventStore`'s methods, run by an `AsyncEventStore` on a private loop."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        thread: threading.Thread | None,
        loop_thread: int | None = None,
    ) -> None:
        self._loop = loop
        self._thread = thread
        """The private loop's thread; None when the loop is a caller's."""
        self._loop_thread = loop_thread
        self.store: AsyncEventStore

    @classmethod
    def over(cls, store: AsyncEventStore) -> BlockingEventStore:
        """A blocking face on `store`, for other threads, run on the loop calling this."""
        blocking = cls(asyncio.get_running_loop(), None, threading.get_ident())
        blocking.store = store
        return blocking

    @classmethod
    def open(cls, url: str, *, max_event_bytes: int = MAX_EVENT_BYTES) -> BlockingEventStore:
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="eventcraft-blocking", daemon=True)
        thread.start()
        blocking = cls(loop, thread)
        try:
            blocking.store = blocking._wait(
                AsyncEventStore.open(url, max_event_bytes=max_event_bytes)
            )
        except BaseException:
            blocking._stop()
            raise
        return blocking

    @property
    def url(self) -> str:
        return self.store.url

    @property
    def max_event_bytes(self) -> int:
        return self.store.max_event_bytes

    def _wait(self, coroutine: Coroutine[Any, Any, T]) -> T:
        if threading.get_ident() == self._loop_thread:
            coroutine.close()
            raise RuntimeError("a blocking store's call on its own loop's thread would block it")
        if self._loop.is_closed():
            # Closed by `close()`: the call still reaches the closed async store, on a
            # loop of its own, so that its caller meets what the store says then.
            return asyncio.run(coroutine)
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def _drain(self, events: AsyncIterator[T]) -> Iterator[T]:
        async def collect() -> list[T]:
            return [event async for event in events]

        return iter(self._wait(collect()))

    def append(
        self,
        stream_id: str,
        events: Sequence[NewEvent],
        expected_version: ExpectedVersion = ANY,
        *,
        condition: AppendCondition | None = None,
    ) -> AppendResult:
        return self._wait(
            self.store.append(stream_id, events, expected_version, condition=condition)
        )

    def append_many(self, appends: Sequence[ManyAppend]) -> list[AppendResult]:
        return self._wait(self.store.append_many(appends))

    def count_events(
        self,
        after: int = 0,
        until: int | None = None,
        *,
        categories: Sequence[str] | str | None = None,
        types: Sequence[str] | str | None = None,
        limit: int | None = None,
    ) -> int:
        return self._wait(
            self.store.count_events(after, until, categories=categories, types=types, limit=limit)
        )

    def read_query(self, query: Query, after: int = 0, limit: int | None = None) -> QueryResult:
        return self._wait(self.store.read_query(query, after, limit))

    def read_stream(
        self,
        stream_id: str,
        from_version: int | None = None,
        backwards: bool = False,
        limit: int | None = None,
    ) -> Iterator[RecordedEvent]:
        return self._drain(self.store.read_stream(stream_id, from_version, backwards, limit))

    def read_stream_encoded(
        self, stream_id: str, from_version: int | None = None
    ) -> Iterator[EncodedEvent]:
        return self._drain(self.store.read_stream_encoded(stream_id, from_version))

    def read_all(
        self,
        after: int = 0,
        limit: int | None = None,
        *,
        categories: Sequence[str] | str | None = None,
        types: Sequence[str] | str | None = None,
    ) -> Iterator[RecordedEvent]:
        return self._drain(self.store.read_all(after, limit, categories=categories, types=types))

    def read_all_encoded(
        self,
        after: int = 0,
        until: int | None = None,
        *,
        categories: Sequence[str] | str | None = None,
        types: Sequence[str] | str | None = None,
    ) -> Iterator[EncodedRecord]:
        return self._drain(
            self.store.read_all_encoded(after, until, categories=categories, types=types)
        )

    def read_all_json(
        self,
        after: int = 0,
        until: int | None = None,
        *,
        categories: Sequence[str] | str | None = None,
    ) -> Iterator[JsonLines]:
        return self._drain(self.store.read_all_json(after, until, categories=categories))

    def high_water_mark(self) -> int:
        return self._wait(self.store.high_water_mark())

    def read_event(self, event_id: uuid.UUID) -> RecordedEvent | None:
        return self._wait(self.store.read_event(event_id))

    def now(self) -> datetime:
        """As `EventStore.now`."""
        return self._wait(self.store.now())

    def log_status(self) -> LogStatus:
        return self._wait(self.store.log_status())

    def wait_for_events(self, after: int, timeout: float) -> bool:
        return self._wait(self.store.wait_for_events(after, timeout))

    def stream_version(self, stream_id: str) -> int:
        return self._wait(self.store.stream_version(stream_id))

    def list_streams(
        self, category: str | None = None, after: str | None = None, limit: int | None = None
    ) -> Iterator[StreamInfo]:
        return self._drain(self.store.list_streams(category, after, limit))

    def save_snapshot(
        self,
        stream_id: str,
        *,
        version: int,
        type: str,
        data: dict[str, Any] | BaseModel,
        schema_version: int = 1,
    ) -> None:
        self._wait(
            self.store.save_snapshot(
                stream_id, version=version, type=type, data=data, schema_version=schema_version
            )
        )

    def load_snapshot(self, stream_id: str) -> Snapshot | None:
        return self._wait(self.store.load_snapshot(stream_id))

    def delete_stream(
        self,
        stream_id: str,
        expected_version: ExpectedVersion = ANY,
        *,
        tombstone: bool = False,
        deleted_at: datetime | None = None,
    ) -> StreamDeletion:
        return self._wait(
            self.store.delete_stream(
                stream_id, expected_version, tombstone=tombstone, deleted_at=deleted_at
            )
        )

    def stream_deletion(self, stream_id: str) -> StreamDeletion | None:
        return self._wait(self.store.stream_deletion(stream_id))

    def placed_deletions(
        self,
        after: int = 0,
        until: int | None = None,
        *,
        categories: Sequence[str] | str | None = None,
    ) -> list[tuple[int, StreamDeletion]]:
        return self._wait(self.store.placed_deletions(after, until, categories=categories))

    def forget(self, subject: str) -> int:
        return self._wait(self.store.forget(subject))

    def low_water_mark(self) -> int:
        return self._wait(self.store.low_water_mark())

    def close(self) -> None:
        """Close the store and stop the private loop; a face `over` a caller's store
        leaves it open: the caller closes it."""
        if self._thread is not None and self._thread.is_alive():
            try:
                self._wait(self.store.close())
            finally:
                self._stop()

    def _stop(self) -> None:
        assert self._thread is not None
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def __enter__(self) -> BlockingEventStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
