"""The port every async backend implements: `port.Backend`'s methods, awaited.

`AsyncEventStore` checks and encodes the caller's input with the same code
as `EventStore` (`arguments.py`), then calls these; a backend may assume its
arguments are valid. Reads return async iterators that fetch page by page.
"""

from __future__ import annotations

import abc
import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime

from .arguments import AppendCall
from .deletion import StreamDeletion
from .encoding import PreparedBatch
from .errors import InvalidEvent
from .events import (
    AppendResult,
    EncodedEvent,
    EncodedRecord,
    RecordedEvent,
    StreamInfo,
    StreamState,
)
from .json_lines import CHUNK, JsonLines, chunk_of
from .log_status import LogStatus
from .port import POLL_CEILING
from .query import AppendCondition, Query, QueryResult
from .snapshot import PreparedSnapshot, Snapshot


class AsyncBackend(abc.ABC):
    """Storage for one async event store, used from the event loop it was opened on."""

    @abc.abstractmethod
    async def append(
        self,
        stream_id: str,
        category: str,
        batch: PreparedBatch,
        expected: int | StreamState,
        condition: AppendCondition | None = None,
    ) -> AppendResult:
        """As `Backend.append`."""

    @abc.abstractmethod
    async def read_query(self, query: Query, *, after: int, limit: int | None) -> QueryResult:
        """As `Backend.read_query`."""

    @abc.abstractmethod
    async def append_many(self, calls: Sequence[AppendCall]) -> list[AppendResult]:
        """As `Backend.append_many`."""

    @abc.abstractmethod
    def read_stream(
        self, stream_id: str, *, from_version: int | None, backwards: bool, limit: int | None
    ) -> AsyncIterator[RecordedEvent]:
        """As `Backend.read_stream`."""

    @abc.abstractmethod
    def read_all(
        self,
        *,
        after: int,
        limit: int | None,
        categories: Sequence[str] | None,
        types: Sequence[str] | None,
    ) -> AsyncIterator[RecordedEvent]:
        """As `Backend.read_all`: never past the high-water mark."""

    @abc.abstractmethod
    def read_all_encoded(
        self,
        *,
        after: int,
        until: int | None,
        categories: Sequence[str] | None,
        types: Sequence[str] | None,
    ) -> AsyncIterator[EncodedRecord]:
        """As `Backend.read_all_encoded`."""

    async def count_events(
        self,
        *,
        after: int,
        until: int | None,
        categories: Sequence[str] | None,
        types: Sequence[str] | None,
        limit: int | None,
    ) -> int:
        """As `Backend.count_events`; this default reads the events."""
        if limit == 0:
            return 0
        count = 0
        events = self.read_all(after=after, limit=limit, categories=categories, types=types)
        async for event in events:
            if until is not None and event.position > until:
                break
            count += 1
        return count

    async def read_all_json(
        self, *, after: int, until: int | None, categories: Sequence[str] | None
    ) -> AsyncIterator[JsonLines]:
        """As `Backend.read_all_json`; this default from `read_all_encoded`."""
        chunk: list[EncodedRecord] = []
        records = self.read_all_encoded(after=after, until=until, categories=categories, types=None)
        async for record in records:
            chunk.append(record)
            if len(chunk) == CHUNK:
                yield chunk_of(chunk)
                chunk = []
        if chunk:
            yield chunk_of(chunk)

    @abc.abstractmethod
    def read_stream_encoded(
        self, stream_id: str, *, from_version: int
    ) -> AsyncIterator[EncodedEvent]:
        """As `Backend.read_stream_encoded`."""

    @abc.abstractmethod
    async def high_water_mark(self) -> int:
        """As `Backend.high_water_mark`."""

    @abc.abstractmethod
    async def read_event(self, event_id: uuid.UUID) -> RecordedEvent | None:
        """As `Backend.read_event`."""

    async def now(self) -> datetime:
        """As `Backend.now`: the host's clock, unless the database has one of its own."""
        return datetime.now(UTC)

    @abc.abstractmethod
    async def log_status(self) -> LogStatus:
        """As `Backend.log_status`."""

    @abc.abstractmethod
    async def stream_version(self, stream_id: str) -> int:
        """As `Backend.stream_version`."""

    @abc.abstractmethod
    def list_streams(
        self, *, category: str | None, after: str | None, limit: int | None
    ) -> AsyncIterator[StreamInfo]:
        """As `Backend.list_streams`."""

    @abc.abstractmethod
    async def save_snapshot(self, snapshot: PreparedSnapshot) -> None:
        """As `Backend.save_snapshot`."""

    @abc.abstractmethod
    async def load_snapshot(self, stream_id: str) -> Snapshot | None:
        """As `Backend.load_snapshot`."""

    async def delete_stream(
        self,
        stream_id: str,
        expected: int | StreamState,
        tombstone: bool,
        deleted_at: datetime | None,
    ) -> StreamDeletion:
        """As `Backend.delete_stream`."""
        raise InvalidEvent(f"{type(self).__name__} cannot delete streams")

    async def stream_deletion(self, stream_id: str) -> StreamDeletion | None:
        """As `Backend.stream_deletion`."""
        return None

    async def placed_deletions(self, after: int, until: int) -> list[tuple[int, StreamDeletion]]:
        """As `Backend.placed_deletions`."""
        return []

    async def wait_for_events(self, after: int, timeout: float) -> bool:
        """Sleep until the high-water mark passes `after`; False if `timeout` ran out first.

        This default polls with the back-off of `Backend.wait_for_events`,
        sleeping on the loop between looks; PostgreSQL listens instead.
        """
        deadline = time.monotonic() + timeout
        pause = 0.001
        while True:
            if await self.high_water_mark() > after:
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            await asyncio.sleep(min(pause, remaining))
            pause = min(pause * 2, POLL_CEILING)

    @abc.abstractmethod
    async def close(self) -> None:
        """Release connections and threads. Idempotent."""
