"""`AsyncEventStore`: `EventStore`'s twin for code that runs on an event loop.

The same methods with the same arguments, awaited; reads are async
iterators. Arguments are checked by the functions `EventStore` calls
(`arguments.py`), events encoded by the same `PreparedBatch`, and the SQL and
its answers are those of the sync backends: only the waiting differs.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any

from pydantic import BaseModel

from . import arguments, json_lines, telemetry
from .arguments import ManyAppend
from .async_port import AsyncBackend
from .backends import async_backend_for, retention_for
from .deletion import StreamDeletion, of_categories
from .encoding import MAX_EVENT_BYTES, check_max_event_bytes
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
from .personal.keys import KeyStore
from .personal.sealing import Shredder
from .query import AppendCondition, Query, QueryResult
from .retention import Retention
from .snapshot import Snapshot

SUBSCRIPTION_WAIT = 5.0
"""Longest a subscription sleeps between two looks at the log, in seconds; it wakes at
once on an append (NOTIFY on PostgreSQL, polling elsewhere)."""


class AsyncEventStore:
    """An append-only log of events in streams, with one global order, for asyncio.

    Open it with a URL, as `EventStore`, and await it::

        store = await AsyncEventStore.open("postgresql://user@host:5432/db")
        async with store:
            await store.append("order-1", [NewEvent("Placed", {})])
            async for event in store.read_stream("order-1"):
                ...

    Use it from the event loop it was opened on; share it between that loop's tasks.
    """

    def __init__(
        self,
        backend: AsyncBackend,
        url: str,
        *,
        max_event_bytes: int = MAX_EVENT_BYTES,
        keys: KeyStore | str | None = None,
        sealed: bool = False,
    ) -> None:
        self._backend = backend
        self._shredder = Shredder(url if keys is None else keys, sealed=sealed)
        self._retention: Retention | None = None
        self.url = url
        self.max_event_bytes = check_max_event_bytes(max_event_bytes)
        """The most bytes of JSON an appended event's data and metadata may take together."""

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        max_event_bytes: int = MAX_EVENT_BYTES,
        group_commit: bool = True,
        keys: KeyStore | str | None = None,
        sealed: bool = False,
        create_folders: bool = False,
    ) -> AsyncEventStore:
        """The store at `url`; raises `StoreUnavailable` if its database cannot be opened.

        `group_commit` as for `EventStore.open`: appends from tasks waiting at
        the same moment share one transaction and one commit. `keys` and
        `sealed` as for `EventStore.open`; the key store is asked from a thread.
        A SQLite store's missing folder raises `StoreUnavailable` unless
        `create_folders`, as for `EventStore.open`.
        """
        check_max_event_bytes(max_event_bytes)
        with arguments.opening(url):
            backend = await async_backend_for(
                url, group_commit=group_commit, create_folders=create_folders
            )
        return cls(backend, url, max_event_bytes=max_event_bytes, keys=keys, sealed=sealed)

    async def append(
        self,
        stream_id: str,
        events: Sequence[NewEvent],
        expected_version: ExpectedVersion = ANY,
        *,
        condition: AppendCondition | None = None,
    ) -> AppendResult:
        """As `EventStore.append`: atomic, checked against `expected_version` and `condition`,
        safe to retry."""
        traced = telemetry.appending(stream_id, events, expected_version)
        if traced is None:
            call = arguments.append_call(
                stream_id, events, expected_version, self.max_event_bytes, condition
            )
            await self._shredder.seal_batch_async(call.batch)
            return await self._backend.append(*call)
        with traced:
            call = arguments.append_call(
                stream_id, traced.events, expected_version, self.max_event_bytes, condition
            )
            await self._shredder.seal_batch_async(call.batch)
            return traced.done(await self._backend.append(*call))

    async def append_many(self, appends: Sequence[ManyAppend]) -> list[AppendResult]:
        """As `EventStore.append_many`: every append or none, each with its own version check
        and condition."""
        calls = arguments.append_many_call(appends, self.max_event_bytes)
        for call in calls:
            await self._shredder.seal_batch_async(call.batch)
        return await self._backend.append_many(calls)

    async def count_events(
        self,
        after: int = 0,
        until: int | None = None,
        *,
        categories: Sequence[str] | str | None = None,
        types: Sequence[str] | str | None = None,
        limit: int | None = None,
    ) -> int:
        """As `EventStore.count_events`: how many events `read_all` brings, at most `limit`."""
        call = arguments.read_all_call(after, limit, categories, types)
        last = arguments.until_call(until)
        return await self._backend.count_events(
            after=call.after,
            until=last,
            categories=call.categories,
            types=call.types,
            limit=call.limit,
        )

    async def read_query(
        self, query: Query, after: int = 0, limit: int | None = None
    ) -> QueryResult:
        """As `EventStore.read_query`: the events matching `query` after `after`, and the
        position the read covered."""
        query, after, limit = arguments.read_query_call(query, after, limit)
        telemetry.count_read("query")
        found = await self._backend.read_query(query, after=after, limit=limit)
        events = [event async for event in self._shredder.opened_async(_each(found.events))]
        return QueryResult(events, found.head)

    def read_stream(
        self,
        stream_id: str,
        from_version: int | None = None,
        backwards: bool = False,
        limit: int | None = None,
    ) -> AsyncIterator[RecordedEvent]:
        """As `EventStore.read_stream`; the arguments are checked before anything is awaited."""
        stream_id, from_version, limit = arguments.read_stream_call(stream_id, from_version, limit)
        telemetry.count_read("stream")
        return self._shredder.opened_async(
            self._backend.read_stream(
                stream_id, from_version=from_version, backwards=backwards, limit=limit
            )
        )

    def read_stream_encoded(
        self, stream_id: str, from_version: int | None = None
    ) -> AsyncIterator[EncodedEvent]:
        """As `EventStore.read_stream_encoded`."""
        stream_id, start = arguments.read_stream_encoded_call(stream_id, from_version)
        telemetry.count_read("stream_encoded")
        return self._shredder.opened_encoded_async(
            stream_id, self._backend.read_stream_encoded(stream_id, from_version=start)
        )

    def read_all(
        self,
        after: int = 0,
        limit: int | None = None,
        *,
        categories: Sequence[str] | str | None = None,
        types: Sequence[str] | str | None = None,
    ) -> AsyncIterator[RecordedEvent]:
        """As `EventStore.read_all`: position order, up to the high-water mark."""
        call = arguments.read_all_call(after, limit, categories, types)
        telemetry.count_read("all")
        return self._shredder.opened_async(
            self._backend.read_all(
                after=call.after, limit=call.limit, categories=call.categories, types=call.types
            )
        )

    def read_all_encoded(
        self,
        after: int = 0,
        until: int | None = None,
        *,
        categories: Sequence[str] | str | None = None,
        types: Sequence[str] | str | None = None,
    ) -> AsyncIterator[EncodedRecord]:
        """As `EventStore.read_all_encoded`: every field as stored, nothing decoded."""
        call = arguments.read_all_call(after, None, categories, types)
        last = arguments.until_call(until)
        telemetry.count_read("all_encoded")
        return self._shredder.opened_records_async(
            self._backend.read_all_encoded(
                after=call.after, until=last, categories=call.categories, types=call.types
            )
        )

    async def read_all_json(
        self,
        after: int = 0,
        until: int | None = None,
        *,
        categories: Sequence[str] | str | None = None,
    ) -> AsyncIterator[JsonLines]:
        """As `EventStore.read_all_json`: the log as JSON lines, thousands at a time."""
        call = arguments.read_all_call(after, None, categories, None)
        last = arguments.until_call(until)
        telemetry.count_read("all_json")
        chunks = self._backend.read_all_json(
            after=call.after, until=last, categories=call.categories
        )
        async for chunk in chunks:
            if self._shredder.sealed or not json_lines.holds_sealed(chunk):
                yield chunk
            else:  # the key store is synchronous: off the event loop
                yield await asyncio.to_thread(
                    json_lines.opened, chunk, self._shredder.opened_records
                )

    def subscribe(
        self,
        after: int = 0,
        *,
        categories: Sequence[str] | str | None = None,
        types: Sequence[str] | str | None = None,
    ) -> AsyncIterator[RecordedEvent]:
        """Every event past `after`, in position order, then each new one as it commits.

        Never ends by itself (break out of it, or cancel its task); never
        skips an event, whatever order concurrent appends commit in, since it
        only ever reads up to the high-water mark.
        """
        call = arguments.read_all_call(after, None, categories, types)
        return self._tail(call)

    async def _tail(self, call: arguments.ReadAllCall) -> AsyncIterator[RecordedEvent]:
        position = call.after
        while True:
            # Every event up to this mark is readable now, those filtered out too:
            # once they are read, the subscription can wait beyond it.
            mark = await self._backend.high_water_mark()
            async for event in self._shredder.opened_async(
                self._backend.read_all(
                    after=position, limit=None, categories=call.categories, types=call.types
                )
            ):
                position = event.position
                yield event
            position = max(position, mark)
            await self._backend.wait_for_events(position, SUBSCRIPTION_WAIT)

    async def high_water_mark(self) -> int:
        """The position up to which the log is complete: no event can appear below it."""
        return await self._backend.high_water_mark()

    async def read_event(self, event_id: uuid.UUID) -> RecordedEvent | None:
        """The event stored with `event_id`, or None."""
        event = await self._backend.read_event(arguments.event_id_call(event_id))
        return await self._shredder.opened_event_async(event)

    async def now(self) -> datetime:
        """As `EventStore.now`."""
        return await self._backend.now()

    async def log_status(self) -> LogStatus:
        """As `EventStore.log_status`."""
        return await self._backend.log_status()

    async def wait_for_events(self, after: int, timeout: float) -> bool:
        """Sleep until an event beyond position `after` can be read; False on `timeout`."""
        return await self._backend.wait_for_events(*arguments.wait_call(after, timeout))

    async def stream_version(self, stream_id: str) -> int:
        """The stream's current version (its event count); 0 if it has none."""
        return await self._backend.stream_version(arguments.stream_id_call(stream_id))

    def list_streams(
        self, category: str | None = None, after: str | None = None, limit: int | None = None
    ) -> AsyncIterator[StreamInfo]:
        """Streams ordered by id, optionally of one category, after a given id."""
        category, after, limit = arguments.list_streams_call(category, after, limit)
        return self._backend.list_streams(category=category, after=after, limit=limit)

    async def save_snapshot(
        self,
        stream_id: str,
        *,
        version: int,
        type: str,
        data: dict[str, Any] | BaseModel,
        schema_version: int = 1,
    ) -> None:
        """As `EventStore.save_snapshot`."""
        data = await self._shredder.seal_snapshot_async(arguments.stream_id_call(stream_id), data)
        prepared = arguments.snapshot_call(stream_id, version, type, data, schema_version)
        await self._backend.save_snapshot(prepared)

    async def load_snapshot(self, stream_id: str) -> Snapshot | None:
        """The newest snapshot of `stream_id`, or None."""
        snapshot = await self._backend.load_snapshot(arguments.stream_id_call(stream_id))
        return await self._shredder.opened_snapshot_async(snapshot)

    async def delete_stream(
        self,
        stream_id: str,
        expected_version: ExpectedVersion = ANY,
        *,
        tombstone: bool = False,
        deleted_at: datetime | None = None,
    ) -> StreamDeletion:
        """As `EventStore.delete_stream`."""
        return await self._backend.delete_stream(
            *arguments.delete_stream_call(stream_id, expected_version, tombstone, deleted_at)
        )

    async def stream_deletion(self, stream_id: str) -> StreamDeletion | None:
        """As `EventStore.stream_deletion`."""
        return await self._backend.stream_deletion(arguments.stream_id_call(stream_id))

    async def placed_deletions(
        self,
        after: int = 0,
        until: int | None = None,
        *,
        categories: Sequence[str] | str | None = None,
    ) -> list[tuple[int, StreamDeletion]]:
        """As `EventStore.placed_deletions`."""
        after, last, names = arguments.placed_call(after, until, categories)
        return of_categories(await self._backend.placed_deletions(after, last), names)

    @property
    def retention(self) -> Retention:
        """As `EventStore.retention`; its calls block: run them in a thread."""
        if self._retention is None:
            self._retention = retention_for(self.url)
        return self._retention

    async def low_water_mark(self) -> int:
        """As `EventStore.low_water_mark`."""
        return await asyncio.to_thread(self.retention.low_water_mark)

    @property
    def keys(self) -> KeyStore:
        """As `EventStore.keys`; its calls block: run them in a thread."""
        return self._shredder.keys

    async def forget(self, subject: str) -> int:
        """As `EventStore.forget`: `subject`'s key deleted, its fields read as replaced."""
        return await self._shredder.forget_async(subject)

    async def close(self) -> None:
        await self._backend.close()
        self._shredder.close()
        if self._retention is not None:
            self._retention.close()

    async def __aenter__(self) -> AsyncEventStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"AsyncEventStore.open({arguments.redacted(self.url)!r})"


async def _each(events: list[RecordedEvent]) -> AsyncIterator[RecordedEvent]:
    for event in events:
        yield event
