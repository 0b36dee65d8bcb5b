"""The port every async backend implements: a handful of methods, arguments checked.

`AsyncEventStore` checks and encodes the caller's input, then calls these; a
backend may assume its arguments are valid.
Reads return async iterators that fetch page by page.
"""

from __future__ import annotations

import abc
import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime

import orjson

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
    recorded_at_text,
)
from .json_lines import CHUNK, JsonLines, chunk_of, chunks_of
from .log_status import LogStatus
from .query import AppendCondition, Query, QueryResult, covered
from .snapshot import PreparedSnapshot, Snapshot
from .type_counts import Tally, TypeCount, version_text

POLL_CEILING = 0.05
"""Longest pause between two polls of a waiting reader, in seconds."""


class AsyncBackend(abc.ABC):
    """Storage for one async event store, used from the event loop it was opened on.

    A backend of your own subclasses it and implements its abstract methods; the others
    have defaults it may do better than (`read_event` scans the log, `wait_for_events`
    polls, `delete_stream` refuses). `register_backend` names the `BackendKind` that
    opens it, and the conformance suite (`eventcraft.eventstore.testing`) checks it.

    Example::

        from eventcraft.eventstore.async_port import AsyncBackend

        assert sorted(AsyncBackend.__abstractmethods__) == [
            "append", "append_many", "close", "high_water_mark", "list_streams",
            "load_snapshot", "read_all", "read_stream", "read_stream_encoded",
            "save_snapshot", "stream_version",
        ]
    """

    @abc.abstractmethod
    async def append(
        self,
        stream_id: str,
        category: str,
        batch: PreparedBatch,
        expected: int | StreamState,
        condition: AppendCondition | None = None,
    ) -> AppendResult:
        """Append all of `batch` or none, checking `expected` and `condition` in the same
        transaction.

        `batch.encoded` may raise `InvalidEvent`: ask for all of it before
        writing, or roll back what was written when it raises.

        An exact retry (the same ids already stored, in order, in this stream)
        returns the original result and writes nothing; see `idempotency.py`.
        """

    @abc.abstractmethod
    async def append_many(self, calls: Sequence[AppendCall]) -> list[AppendResult]:
        """Append to several streams (each at most once) all or nothing, each append with
        its own version check; the first refusal raises and nothing is written.

        An exact retry of the whole call returns the original results.
        """

    @abc.abstractmethod
    def read_stream(
        self, stream_id: str, *, from_version: int | None, backwards: bool, limit: int | None
    ) -> AsyncIterator[RecordedEvent]:
        """Events of one stream in version order (descending if `backwards`).

        `from_version` is inclusive; None means the first (or, backwards, the last).
        """

    @abc.abstractmethod
    def read_all(
        self,
        *,
        after: int,
        limit: int | None,
        categories: Sequence[str] | None,
        types: Sequence[str] | None,
    ) -> AsyncIterator[RecordedEvent]:
        """Events with position > `after`, in position order, up to the high-water mark.

        Filters keep only the named categories and event types; they never let
        a reader pass an event it has not been shown (see `schema.py`).
        """

    async def read_query(self, query: Query, *, after: int, limit: int | None) -> QueryResult:
        """Events matching `query` with position > `after`, in position order, up to the
        high-water mark, and the position the read covered.

        This default filters the whole log; a backend with an index on tags does better.
        """
        head = await self.high_water_mark()
        found: list[RecordedEvent] = []
        async for event in self.read_all(after=after, limit=None, categories=None, types=None):
            if event.position > head or (limit is not None and len(found) >= limit):
                break
            if query.matches(event.type, event.tags):
                found.append(event)
        return covered(found, limit, head, after)

    async def count_events(
        self,
        *,
        after: int,
        until: int | None,
        categories: Sequence[str] | None,
        types: Sequence[str] | None,
        limit: int | None,
    ) -> int:
        """How many events `read_all` brings after `after`, to `until` (and the high-water
        mark), at most `limit`.

        This default reads them; a backend with indexes on categories and
        types counts there instead, without building the events.
        """
        if limit == 0:
            return 0
        count = 0
        events = self.read_all(after=after, limit=limit, categories=categories, types=types)
        async for event in events:
            if until is not None and event.position > until:
                break
            count += 1
        return count

    async def count_types(
        self, *, after: int, until: int | None, types: Sequence[str] | None
    ) -> list[TypeCount]:
        """How many events of each type and stored schema version `read_all` brings after
        `after`, to `until` (and the high-water mark), by type and version.

        This default reads the events' metadata; a backend of SQL counts with one
        GROUP BY instead, reading nothing out.
        """
        tally = Tally()
        records = self.read_all_encoded(after=after, until=until, categories=None, types=types)
        async for record in records:
            tally.add(
                record.type, version_text(record.metadata), 1, record.position, record.recorded_at
            )
        return tally.counts()

    @abc.abstractmethod
    def read_stream_encoded(
        self, stream_id: str, *, from_version: int
    ) -> AsyncIterator[EncodedEvent]:
        """The events of one stream from `from_version` on, their JSON not decoded."""

    async def read_all_encoded(
        self,
        *,
        after: int,
        until: int | None,
        categories: Sequence[str] | None,
        types: Sequence[str] | None,
    ) -> AsyncIterator[EncodedRecord]:
        """`read_all` to `until` (and the high-water mark), each event's fields as stored.

        This default encodes what `read_all` decoded; a backend that can hand
        its columns over as text does better.
        """
        events = self.read_all(after=after, limit=None, categories=categories, types=types)
        async for event in events:
            if until is not None and event.position > until:
                return
            yield EncodedRecord(
                event.position,
                str(event.id),
                event.stream_id,
                event.version,
                event.type,
                orjson.dumps(event.data).decode(),
                orjson.dumps(event.metadata).decode(),
                recorded_at_text(event.recorded_at),
                event.tags,
            )

    def read_all_json(
        self, *, after: int, until: int | None, categories: Sequence[str] | None
    ) -> AsyncIterator[JsonLines]:
        """`read_all_encoded` as JSON lines (`json_lines.py`), in chunks.

        This default writes the lines of `read_all_encoded`'s records; a
        backend that can copy its rows as text makes them straight from that.
        """
        records = self.read_all_encoded(after=after, until=until, categories=categories, types=None)
        if True:  # ASYNC
            return _chunks_of(records)
        else:
            return chunks_of(records)

    @abc.abstractmethod
    async def high_water_mark(self) -> int:
        """The highest position below which no event can appear any more."""

    async def read_event(self, event_id: uuid.UUID) -> RecordedEvent | None:
        """The event stored with this id, None if there is none.

        This scans the log; a backend with an index on ids looks it up instead.
        """
        async for event in self.read_all(after=0, limit=None, categories=None, types=None):
            if event.id == event_id:
                return event
        return None

    async def now(self) -> datetime:
        """The database's time, as it stamps `recorded_at`: for an in-process database
        (SQLite, memory), the host's clock, which its appends read too."""
        return datetime.now(UTC)

    async def log_status(self) -> LogStatus:
        """The head, the high-water mark and what holds readers between them.

        Backends that commit positions in order have nothing to hold.
        """
        head = await self.high_water_mark()
        return LogStatus(head=head, high_water_mark=head, held=None)

    @abc.abstractmethod
    async def stream_version(self, stream_id: str) -> int:
        """The stream's current version; 0 if it holds no events."""

    @abc.abstractmethod
    def list_streams(
        self, *, category: str | None, after: str | None, limit: int | None
    ) -> AsyncIterator[StreamInfo]:
        """Streams in order of their ids, those after `after` only."""

    @abc.abstractmethod
    async def save_snapshot(self, snapshot: PreparedSnapshot) -> None:
        """Keep `snapshot` as the stream's newest unless a later one is stored.

        Raises `InvalidEvent` (from `snapshot.beyond_the_stream`) when the
        stream has not reached the snapshot's version.
        """

    @abc.abstractmethod
    async def load_snapshot(self, stream_id: str) -> Snapshot | None:
        """The stream's newest snapshot, or None."""

    async def delete_stream(
        self,
        stream_id: str,
        expected: int | StreamState,
        tombstone: bool,
        deleted_at: datetime | None,
    ) -> StreamDeletion:
        """Delete the stream (see `deletion.py`) if reads show it at `expected`, atomically
        with appends; raise `StreamTombstoned` if it is a tombstone already."""
        raise InvalidEvent(f"{type(self).__name__} cannot delete streams")

    async def stream_deletion(self, stream_id: str) -> StreamDeletion | None:
        """The stream's deletion, None if it was never deleted."""
        return None

    async def placed_deletions(self, after: int, until: int) -> list[tuple[int, StreamDeletion]]:
        """The deletions whose stream's event at the version deleted has a position in
        (`after`, `until`], with that position, in position order; from `after` 0, first
        those of streams deleted before their first event, at position 0."""
        return []

    async def wait_for_events(self, after: int, timeout: float) -> bool:
        """Sleep until the high-water mark passes `after`; False if `timeout` ran out first.

        This default polls with a back-off from 1 ms to `POLL_CEILING`; a
        backend that can be told of commits (PostgreSQL's NOTIFY) does better.
        """
        deadline = time.monotonic() + timeout
        pause = 0.001
        while True:
            if await self.high_water_mark() > after:
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            if True:  # ASYNC
                await asyncio.sleep(min(pause, remaining))
            else:
                time.sleep(min(pause, remaining))
            pause = min(pause * 2, POLL_CEILING)

    @abc.abstractmethod
    async def close(self) -> None:
        """Release connections and threads. Idempotent."""


if True:  # ASYNC

    async def _chunks_of(records: AsyncIterator[EncodedRecord]) -> AsyncIterator[JsonLines]:
        """The lines of `records`, `CHUNK` at a time (`json_lines.chunks_of`, awaited)."""
        chunk: list[EncodedRecord] = []
        async for record in records:
            chunk.append(record)
            if len(chunk) == CHUNK:
                yield chunk_of(chunk)
                chunk = []
        if chunk:
            yield chunk_of(chunk)
