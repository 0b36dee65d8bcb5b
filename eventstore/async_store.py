"""`AsyncEventStore`: the one object callers hold, whatever the backend.

For code that runs on an event loop: the methods of the sync store, with the
same arguments, awaited; reads are async iterators. Arguments are checked by
the same functions (`arguments.py`), events encoded by the same
`PreparedBatch`, and the SQL and its answers are those of the sync backends:
only the waiting differs.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, cast

from pydantic import BaseModel

from . import archive_reads, arguments, json_lines, telemetry, tenant_places
from .archive_reads import ArchiveOption, Chunks, StoreArchive, archive_option
from .arguments import ManyAppend
from .async_port import AsyncBackend
from .backends import async_backend_for, retention_for, with_replicas
from .deletion import StreamDeletion, of_categories
from .encoding import MAX_EVENT_BYTES, check_max_event_bytes
from .errors import InvalidTenant
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
from .tenant_places import TenantDrop, TenantPlace
from .type_counts import TypeCount

if TYPE_CHECKING:  # the tenants' module opens stores: imported for its type alone
    from .async_tenants import AsyncTenants

if True:  # ASYNC
    SUBSCRIPTION_WAIT = 5.0
    """Longest a subscription sleeps between two looks at the log, in seconds; it wakes at
    once on an append (NOTIFY on PostgreSQL, polling elsewhere)."""


class AsyncEventStore:
    """An append-only log of events in streams, with one global order, for asyncio.

    Open it with a URL, as the sync store, and await it. The URL names the backend:
    `sqlite:///events.db` (a file, relative path), `sqlite:////var/lib/app/events.db`,
    `postgresql://user@host:5432/db?schema=orders` or `memory://`.
    Use it from the event loop it was opened on; share it between that loop's tasks.

    Example::

        from eventcraft.eventstore import AsyncEventStore, NewEvent

        async with await AsyncEventStore.open("sqlite:///shop.db") as store:
            await store.append("order-1", [NewEvent("OrderPlaced", {"cents": 1250})])
            await store.append("order-1", [NewEvent("OrderPaid", {})], expected_version=1)
            events = [event async for event in store.read_stream("order-1")]
        assert [(e.version, e.type) for e in events] == [(1, "OrderPlaced"), (2, "OrderPaid")]
    """

    def __init__(
        self,
        backend: AsyncBackend,
        url: str,
        *,
        max_event_bytes: int = MAX_EVENT_BYTES,
        keys: KeyStore | str | None = None,
        sealed: bool = False,
        place: TenantPlace | None = None,
        tenants: AsyncTenants | None = None,
        archive: ArchiveOption = False,
    ) -> None:
        self._backend = backend
        self._shredder = Shredder(url if keys is None else keys, sealed=sealed)
        self._retention: Retention | None = None
        self.archive = archive_option(archive)
        """What `archive=` asked for: False (the table alone), True (the folder the last
        retention run recorded) or the archive's folder."""
        self._archive = StoreArchive(archive, lambda: self.retention) if archive else None
        self._place = place
        self._tenancy = tenants
        self.url = url
        self.max_event_bytes = check_max_event_bytes(max_event_bytes)
        """The most bytes of JSON an appended event's data and metadata may take together."""
        self.tenant = None if place is None else place.tenant
        """The tenant whose store this is (`?tenant=` in its URL, or `for_tenant`); None for
        a store of no tenant."""

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
        tenants: AsyncTenants | None = None,
        replicas: Sequence[str] = (),
        archive: ArchiveOption = False,
    ) -> AsyncEventStore:
        """The store at `url`; raises `StoreUnavailable` if its database cannot be opened.

        An event whose data and metadata take more than `max_event_bytes` of
        JSON together is refused (`InvalidEvent`); the default is 4 MiB.

        With `group_commit` (the default), appends from tasks waiting at the
        same moment share one transaction and one commit, each still all or
        nothing with its own version check; a lone caller's append goes at once.

        Fields marked `Personal` are sealed with keys of the key store `keys`:
        a `KeyStore`, or the URL of one; by default the table `eventcraft_keys`
        in the store's own database. With `sealed`, reads hand those fields over
        sealed, as stored: for copies of the log that must stay erasable.
        The key store is asked from a thread.

        A SQLite store's file is made if it is missing, in a folder that is
        there: a missing folder raises `StoreUnavailable` naming it, unless
        `create_folders` asks for it to be made.

        One tenant's store: `?tenant=acme` in a URL that names each tenant's place with
        `{tenant}` (`sqlite:///tenants/{tenant}.db?tenant=acme`) opens the store of that
        tenant alone, its database or folder made if missing (`AsyncTenants` says where a
        tenant may be). With `tenants`, the store hands out its tenants' stores
        (`for_tenant`), and closes them when it closes.

        With `replicas` (PostgreSQL: the URL of one hot standby of the store's server,
        the same as `?replica=` in `url`), the store reads from the standby and writes
        to the primary; a caller reads its own writes (docs: how-to, read replicas).

        With `archive`, reads of the global log (`read_all` and its encoded and JSON
        forms; the async store's `subscribe`) and stream reads return, at or below the
        low-water mark, the events retention archived and removed, from the Parquet
        archive, then the table's: the whole log, each event once (`archive_reads.py`).
        `True` reads the folder the last retention run recorded; a path names the folder
        (moved, or mounted elsewhere). Reading below the mark needs pyarrow (the
        `eventcraft[retention]` extra): without it, or without the folder, such a read
        raises `ArchiveUnreadable`. By default (False) reads return the table's events
        alone, with the holes retention left below the mark.
        """
        check_max_event_bytes(max_event_bytes)
        archive_option(archive)
        if replicas:
            url = with_replicas(url, replicas)
        place = tenant_places.tenant_place(url)
        if place is not None:
            if tenants is not None:
                raise InvalidTenant("a tenant's store has no tenants: give tenants= to another")
            if True:  # ASYNC
                await asyncio.to_thread(tenant_places.prepare, place)
            else:
                tenant_places.prepare(place)
            url = place.url
        with arguments.opening(url):
            backend = await async_backend_for(
                url, group_commit=group_commit, create_folders=create_folders
            )
        return cls(
            backend,
            url,
            max_event_bytes=max_event_bytes,
            keys=keys,
            sealed=sealed,
            place=place,
            tenants=tenants,
            archive=archive,
        )

    async def append(
        self,
        stream_id: str,
        events: Sequence[NewEvent],
        expected_version: ExpectedVersion = ANY,
        *,
        condition: AppendCondition | None = None,
    ) -> AppendResult:
        """Append `events` to `stream_id` atomically, if the stream is at `expected_version`.

        Raises `WrongExpectedVersion` (nothing written) when it is not. Sending
        the same batch again (same event ids) writes nothing and returns the
        first result, so a caller may retry until it gets an answer.

        With a `condition`, raises `AppendConditionFailed` (nothing written) when
        an event matching its query was stored after its position: the check of
        a decision made on `read_query`'s result. Only writers of matching events
        wait for each other.
        """
        traced = telemetry.appending(stream_id, events, expected_version, self.tenant)
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
        """Append to several streams atomically: every append or none.

        `appends` are `(stream_id, events, expected_version)` tuples, or
        `(stream_id, events, expected_version, condition)`, each stream at most
        once. Each append checks its own version and condition, against the store
        as it was before the call; when one is refused, `WrongExpectedVersion`
        (or `AppendConditionFailed`) names its stream and nothing is written.
        Sending the same call again (same event ids) writes nothing and
        returns the first results. Returns each append's result, in order.
        """
        calls = arguments.append_many_call(appends, self.max_event_bytes)
        for call in calls:
            await self._shredder.seal_batch_async(call.batch)
        return await self._backend.append_many(calls)

    def read_stream(
        self,
        stream_id: str,
        from_version: int | None = None,
        backwards: bool = False,
        limit: int | None = None,
    ) -> AsyncIterator[RecordedEvent]:
        """The events of one stream, from `from_version` (inclusive) on, or back from it.

        With `archive=` (see `open`), versions retention removed come from the archive,
        in their place. The arguments are checked at the call, before anything is read."""
        stream_id, from_version, limit = arguments.read_stream_call(stream_id, from_version, limit)
        telemetry.count_read("stream", self.tenant)
        events = self._backend.read_stream(
            stream_id, from_version=from_version, backwards=backwards, limit=limit
        )
        if self._archive is not None:
            events = self._stream_whole(stream_id, events, from_version, backwards, limit)
        return self._shredder.opened_async(events)

    def read_stream_encoded(
        self, stream_id: str, from_version: int | None = None
    ) -> AsyncIterator[EncodedEvent]:
        """The events of one stream from `from_version` (inclusive) on, as stored.

        Only their versions, types, data left as JSON text and the metadata's
        `EVENT_VERSION`: for a reader that decodes the JSON into its own types
        at once, such as `model_validate_json`, this costs half of `read_stream`.
        """
        stream_id, start = arguments.read_stream_encoded_call(stream_id, from_version)
        telemetry.count_read("stream_encoded", self.tenant)
        events = self._backend.read_stream_encoded(stream_id, from_version=start)
        if self._archive is not None:
            events = self._stream_whole(stream_id, events, start, False, None)
        return self._shredder.opened_encoded_async(stream_id, events)

    def read_all(
        self,
        after: int = 0,
        limit: int | None = None,
        *,
        categories: Sequence[str] | str | None = None,
        types: Sequence[str] | str | None = None,
    ) -> AsyncIterator[RecordedEvent]:
        """Events of every stream with position > `after`, in position order.

        Stops at the high-water mark: a reader that tails this, passing the
        last position it saw, sees every committed event once, in order.
        `categories` and `types` narrow it to some streams or event types.
        Below the low-water mark, the events retention left in the table; with
        `archive=` (see `open`), every event, from the archive.
        """
        call = arguments.read_all_call(after, limit, categories, types)
        telemetry.count_read("all", self.tenant)
        return self._shredder.opened_async(self._log(call.after, call.limit, call))

    def _log(
        self, after: int, limit: int | None, call: arguments.ReadAllCall
    ) -> AsyncIterator[RecordedEvent]:
        """The global log after `after` as stored: the table's events, and with `archive=`
        the archive's in place of those retention removed (`archive_reads.py`)."""
        categories, types = call.categories, call.types
        if self._archive is None:
            return self._backend.read_all(
                after=after, limit=limit, categories=categories, types=types
            )

        def table(start: int, left: int | None) -> AsyncIterator[list[RecordedEvent]]:
            events = self._backend.read_all(
                after=start, limit=left, categories=categories, types=types
            )
            return _lists(events, archive_reads.CHUNK)

        chunks = archive_reads.RECORDED
        return _flat(self._whole(chunks, table, after, None, limit, categories, types))

    async def count_events(
        self,
        after: int = 0,
        until: int | None = None,
        *,
        categories: Sequence[str] | str | None = None,
        types: Sequence[str] | str | None = None,
        limit: int | None = None,
    ) -> int:
        """How many events `read_all(after, categories=, types=)` brings up to `until`
        (inclusive; None for the high-water mark), counting at most `limit`.

        Counted in the store's indexes, nothing read: the cost grows with the events
        counted, which `limit` bounds (a count that reaches it says "at least").
        """
        call = arguments.read_all_call(after, limit, categories, types)
        last = arguments.until_call(until)
        return await self._backend.count_events(
            after=call.after,
            until=last,
            categories=call.categories,
            types=call.types,
            limit=call.limit,
        )

    async def count_types(
        self,
        after: int = 0,
        until: int | None = None,
        *,
        types: Sequence[str] | str | None = None,
    ) -> list[TypeCount]:
        """How many events of each type and stored schema version (`EVENT_VERSION`) the
        log holds after `after`, up to `until` (inclusive; None for the high-water mark):
        a `TypeCount` for each, by type and version. `types` narrows it to some types.

        On SQLite and PostgreSQL the database counts them in one statement (a GROUP BY
        of the type and the metadata's version), no event read out or decoded: the cost
        grows with the events counted, which `after`, `until` and `types` bound. What
        retention removed is not counted.
        """
        call = arguments.read_all_call(after, None, None, types)
        last = arguments.until_call(until)
        return await self._backend.count_types(after=call.after, until=last, types=call.types)

    async def read_query(
        self, query: Query, after: int = 0, limit: int | None = None
    ) -> QueryResult:
        """The events matching `query` with position > `after`, in position order, and the
        position the read covered: `head`, the `after` of the `AppendCondition` for a
        decision made on these events.

        Every matching event up to `head` is in the result, and none can be stored
        there later. `head` is the high-water mark, or on PostgreSQL, for a query whose
        items all have tags, the top of the log as the read found it (the read waits
        for writers of its tags; docs/ARCHITECTURE.md); with `limit`, the position of
        the `limit`-th event when the read stopped there.
        """
        query, after, limit = arguments.read_query_call(query, after, limit)
        telemetry.count_read("query", self.tenant)
        found = await self._backend.read_query(query, after=after, limit=limit)
        if True:  # ASYNC
            events = [event async for event in self._shredder.opened_async(_each(found.events))]
        else:
            events = list(self._shredder.opened(iter(found.events)))
        return QueryResult(events, found.head)

    def read_all_encoded(
        self,
        after: int = 0,
        until: int | None = None,
        *,
        categories: Sequence[str] | str | None = None,
        types: Sequence[str] | str | None = None,
    ) -> AsyncIterator[EncodedRecord]:
        """`read_all` from `after` to `until` (inclusive; None for the high-water mark), each
        event as an `EncodedRecord`: its fields as stored, nothing decoded.

        For readers that write events out again (an export, a download): it
        costs a fraction of `read_all`. With `archive=`, the archive's below the
        low-water mark, as `read_all`.
        """
        call = arguments.read_all_call(after, None, categories, types)
        last = arguments.until_call(until)
        telemetry.count_read("all_encoded", self.tenant)

        def table(start: int, left: int | None) -> AsyncIterator[EncodedRecord]:
            return self._backend.read_all_encoded(
                after=start, until=last, categories=call.categories, types=call.types
            )

        if self._archive is None:
            return self._shredder.opened_records_async(table(call.after, None))

        def chunked(start: int, left: int | None) -> AsyncIterator[list[EncodedRecord]]:
            return _lists(table(start, left), archive_reads.CHUNK)

        whole = self._whole(
            archive_reads.RECORDS, chunked, call.after, last, None, call.categories, call.types
        )
        return self._shredder.opened_records_async(_flat(whole))

    def read_all_json(
        self,
        after: int = 0,
        until: int | None = None,
        *,
        categories: Sequence[str] | str | None = None,
    ) -> AsyncIterator[JsonLines]:
        """`read_all_encoded` as JSON lines, thousands at a time: each event one JSON object
        with every field, keys sorted, `data` and `metadata` as stored (`json_lines.py`).

        What an export writes: on PostgreSQL the lines are made straight from
        the copied rows, at a fraction of the cost of anything that builds an
        object per event. With `archive=`, the archive's below the low-water mark,
        as `read_all`.
        """
        call = arguments.read_all_call(after, None, categories, None)
        last = arguments.until_call(until)
        telemetry.count_read("all_json", self.tenant)

        def table(start: int, left: int | None) -> AsyncIterator[JsonLines]:
            return self._backend.read_all_json(after=start, until=last, categories=call.categories)

        if self._archive is None:
            chunks = table(call.after, None)
        else:
            chunks = self._whole(
                archive_reads.LINES, table, call.after, last, None, call.categories, None
            )
        return chunks if self._shredder.sealed else self._opened_json(chunks)

    async def _whole(
        self,
        chunks: Chunks[C],
        table: Callable[[int, int | None], AsyncIterator[C]],
        after: int,
        until: int | None,
        limit: int | None,
        categories: Sequence[str] | None,
        types: Sequence[str] | None,
    ) -> AsyncIterator[C]:
        """`table`'s chunks after `after` (to `until`, `limit` events at most), and the
        archive's in place of what retention removed: the seam (`archive_reads.py`)."""
        position, left = after, limit
        while (left is None or left > 0) and (until is None or position < until):
            read = table(position, left)
            moved = False
            try:
                async for chunk in read:
                    if not chunks.whole(chunk, position):
                        # A gap: retention's hole if the mark, read now, lies beyond it.
                        mark = await self.low_water_mark()
                        if mark > position:
                            async for archived in self._archived(
                                chunks, mark, position, until, left, categories, types
                            ):
                                yield archived
                                if left is not None:
                                    left -= chunks.count(archived)
                            position = mark if until is None else min(mark, until)
                            moved = True
                            kept = chunks.above(chunk, mark)
                            if kept is None or left == 0:
                                break
                            # Read before the archive took its share of the limit.
                            chunk = kept if left is None else chunks.first(kept, left)
                    yield chunk
                    position = chunks.last(chunk)
                    if left is not None:
                        left -= chunks.count(chunk)
                    if moved:
                        break  # read the table again from here: it may hold more above
            finally:
                await _closed(read)
            if not moved:
                # The table is read to its end (or the limit): a run may have removed what
                # lay beyond where it ended, which only the archive holds now.
                if left == 0:
                    return
                mark = await self.low_water_mark()
                if mark <= position or (until is not None and position >= until):
                    return
                async for archived in self._archived(
                    chunks, mark, position, until, left, categories, types
                ):
                    yield archived
                    if left is not None:
                        left -= chunks.count(archived)
                position = mark if until is None else min(mark, until)

    def _archived(
        self,
        chunks: Chunks[C],
        mark: int,
        after: int,
        until: int | None,
        left: int | None,
        categories: Sequence[str] | None,
        types: Sequence[str] | None,
    ) -> AsyncIterator[C]:
        """The archive's chunks after `after`, to the mark (and `until`)."""
        assert self._archive is not None
        upto = mark if until is None else min(mark, until)
        pages = chunks.archived(self._archive, mark, after, upto, left, categories, types)
        if True:  # ASYNC
            return _threaded(pages)
        else:
            return pages

    async def _stream_whole(
        self,
        stream_id: str,
        events: AsyncIterator[S],
        start: int | None,
        backwards: bool,
        limit: int | None,
    ) -> AsyncIterator[S]:
        """A stream read's events, with those retention removed where versions are
        missing, from the archive; hidden versions (a deletion's) stay hidden."""
        left = limit
        # The version the next event should have (None: the stream's newest), and the
        # position of the last event handed over (0: none yet, or an `EncodedEvent`).
        expected = start if backwards else (start or 1)
        near = 0
        async for event in events:
            if expected is None:
                expected = event.version
            if event.version != expected:
                found = await self._stream_gap(
                    stream_id, event, expected, near, backwards, found_before=bool(near)
                )
                for filled in found:
                    yield filled
                    if left is not None:
                        left -= 1
                        if left == 0:
                            return
            yield event
            near = _position_of(event)
            expected = event.version - 1 if backwards else event.version + 1
            if left is not None:
                left -= 1
                if left == 0:
                    return
        if backwards and (left is None or left > 0) and (expected is None or expected > 0):
            found = await self._stream_gap(
                stream_id, None, expected, near, backwards, found_before=bool(near)
            )
            for filled in found[:left]:
                yield filled

    async def _stream_gap(
        self,
        stream_id: str,
        event: S | None,
        expected: int | None,
        near: int,
        backwards: bool,
        found_before: bool,
    ) -> list[S]:
        """The archived events of `stream_id` between the last version handed over and
        `event` (None: the stream's first, reading backwards), in the read's order."""
        mark = await self.low_water_mark()
        if mark == 0:
            return []
        deletion = await self._backend.stream_deletion(stream_id)
        lowest = 1 if deletion is None else deletion.version + 1
        if backwards:
            top = expected
            if not found_before:
                # Backwards from a version the stream may not reach: from its newest.
                newest = await self._backend.stream_version(stream_id)
                top = newest if top is None else min(top, newest)
            low = lowest if event is None else event.version + 1
            if top is None or top < low:
                return []
            versions = range(low, top + 1)
            after = 0 if event is None else _position_of(event)
            upto = near - 1 if near else mark
        else:
            assert event is not None and expected is not None
            versions = range(max(expected, lowest), event.version)
            after, upto = near, (_position_of(event) or mark + 1) - 1
        if not versions:
            return []
        assert self._archive is not None
        found = archive_reads.stream_archived
        encoded = isinstance(event, EncodedEvent)
        if True:  # ASYNC
            read = await asyncio.to_thread(
                found, self._archive, mark, stream_id, versions, after, upto, encoded=encoded
            )
        else:
            read = found(self._archive, mark, stream_id, versions, after, upto, encoded=encoded)
        ordered = cast(list[S], read)
        return ordered[::-1] if backwards else ordered

    async def _opened_json(self, chunks: AsyncIterator[JsonLines]) -> AsyncIterator[JsonLines]:
        async for chunk in chunks:
            if json_lines.holds_sealed(chunk):
                if True:  # ASYNC
                    # The key store is synchronous: off the event loop.
                    chunk = await asyncio.to_thread(
                        json_lines.opened, chunk, self._shredder.opened_records
                    )
                else:
                    chunk = json_lines.opened(chunk, self._shredder.opened_records)
            yield chunk

    def open_events(self, events: Iterable[RecordedEvent]) -> AsyncIterator[RecordedEvent]:
        """`events` read elsewhere as stored (from the archive), their personal fields opened
        as this store's own reads open them."""
        return self._shredder.opened_async(_each(events))

    if True:  # ASYNC

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
                async for event in self._shredder.opened_async(self._log(position, None, call)):
                    position = event.position
                    yield event
                position = max(position, mark)
                await self._backend.wait_for_events(position, SUBSCRIPTION_WAIT)

    async def high_water_mark(self) -> int:
        """The position up to which the log is complete: no event can appear below it."""
        return await self._backend.high_water_mark()

    async def read_event(self, event_id: uuid.UUID) -> RecordedEvent | None:
        """The event stored with `event_id`, or None if no event has that id."""
        return await self._shredder.opened_event_async(
            await self._backend.read_event(arguments.event_id_call(event_id))
        )

    async def now(self) -> datetime:
        """The database's time (UTC), as it stamps `recorded_at`: what a lease recorded in an
        event is timed by, so that processes whose clocks differ agree on when it ends."""
        return await self._backend.now()

    async def log_status(self) -> LogStatus:
        """The log's head, its high-water mark, and the append in flight that holds readers
        between the two, if any (PostgreSQL only: elsewhere they are always equal)."""
        return await self._backend.log_status()

    async def wait_for_events(self, after: int, timeout: float) -> bool:
        """Sleep until an event beyond position `after` can be read; False on `timeout`.

        PostgreSQL wakes on NOTIFY from the appending transaction; SQLite
        polls with a short back-off. Either way a True answer means
        `read_all(after=after)` has something to return.
        """
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
        """Keep `data` as the state of `stream_id` at `version`, outside the log.

        Only the newest snapshot of a stream is kept: an older one than that
        stored is ignored. A version the stream has not reached is refused
        (`InvalidEvent`).
        """
        data = await self._shredder.seal_snapshot_async(arguments.stream_id_call(stream_id), data)
        await self._backend.save_snapshot(
            arguments.snapshot_call(stream_id, version, type, data, schema_version)
        )

    async def load_snapshot(self, stream_id: str) -> Snapshot | None:
        """The newest snapshot of `stream_id`, or None."""
        return await self._shredder.opened_snapshot_async(
            await self._backend.load_snapshot(arguments.stream_id_call(stream_id))
        )

    async def delete_stream(
        self,
        stream_id: str,
        expected_version: ExpectedVersion = ANY,
        *,
        tombstone: bool = False,
        deleted_at: datetime | None = None,
    ) -> StreamDeletion:
        """Delete `stream_id` if it is at `expected_version`: reads no longer show it, the
        global log keeps its events until retention removes them (archived first).

        An append brings a deleted stream back, its versions going on after the last
        one deleted; with `tombstone`, the stream can never be written again
        (`StreamTombstoned`). Raises `WrongExpectedVersion` (nothing deleted) when the
        stream is not at `expected_version`. `deleted_at` (timezone-aware) is the time the
        deletion keeps instead of now: an import gives the original's, as it gives events
        their `recorded_at`. See `eventstore/deletion.py`.
        """
        return await self._backend.delete_stream(
            *arguments.delete_stream_call(stream_id, expected_version, tombstone, deleted_at)
        )

    async def stream_deletion(self, stream_id: str) -> StreamDeletion | None:
        """How `stream_id` was deleted, None if it never was."""
        return await self._backend.stream_deletion(arguments.stream_id_call(stream_id))

    async def placed_deletions(
        self,
        after: int = 0,
        until: int | None = None,
        *,
        categories: Sequence[str] | str | None = None,
    ) -> list[tuple[int, StreamDeletion]]:
        """The streams (of `categories`, if given) deleted at an event with a position
        after `after` (up to `until`), as (that event's position, the deletion), in
        position order: where a copy of the log must delete them (an export writes each
        after that event's line).

        One query, however many streams the log holds. A stream deleted (or
        tombstoned) before its first event stands before every event, at position
        0: listed when `after` is 0."""
        after, last, names = arguments.placed_call(after, until, categories)
        return of_categories(await self._backend.placed_deletions(after, last), names)

    @property
    def retention(self) -> Retention:
        """The store's retention: its runs, and removing events by rules (`retention.py`).
        `eventcraft.operations.retention` archives the log first, then removes.
        Its calls block: run them in a thread."""
        if self._retention is None:
            self._retention = retention_for(self.url)
        return self._retention

    async def low_water_mark(self) -> int:
        """Where the log in the store begins to be whole: 0 until retention removed events.
        Every event at or below it is in the archive the last run names
        (`retention.runs()`), and only some are in the store; above it, all are. A store
        opened with `archive=` reads them there."""
        if True:  # ASYNC
            return await asyncio.to_thread(self.retention.low_water_mark)
        else:
            return self.retention.low_water_mark()

    @property
    def keys(self) -> KeyStore:
        """The key store personal fields are sealed with (opened when first used).
        Its calls block: run them in a thread."""
        return self._shredder.keys

    async def forget(self, subject: str) -> int:
        """Delete `subject`'s key: from now on every reader sees its personal fields as
        their replacement (`FORGOTTEN` unless the field names another).

        The key is erased from the key store's database files (see
        `sqlite/key_table.py`); other processes stop opening the fields once their
        cached copy of the key expires (`KeyStore.cache_seconds`). Returns how
        many keys were erased: 0 if the subject had none, or was forgotten.
        """
        return await self._shredder.forget_async(subject)

    def for_tenant(self, tenant: str) -> AsyncEventStore:
        """The store of `tenant`, from the tenants this store was opened with
        (`tenants=`): a store like this one, holding only that tenant's events.
        `InvalidTenant` if the tenant id is refused (`check_tenant`), or this store has no
        tenants.

        Example::

            from eventcraft.eventstore import AsyncEventStore, AsyncTenants, NewEvent

            tenants = AsyncTenants("sqlite:///tenant-{tenant}.db")
            async with await AsyncEventStore.open("sqlite:///shop.db", tenants=tenants) as shop:
                acme = shop.for_tenant("acme")
                await acme.append("order-1", [NewEvent("Placed", {})])
                assert await acme.stream_version("order-1") == 1
                assert await shop.stream_version("order-1") == 0  # the shop's own log
        """
        if self._tenancy is None:
            raise InvalidTenant(
                f"this store has no tenants: open it with tenants= naming where each "
                f"tenant's store is (a URL with {{tenant}}, tenancy=shared for tenants side "
                f"by side, or a function), or open one tenant's store with ?tenant= "
                f"(for_tenant({tenant!r}) was asked)"
            )
        return self._tenancy.for_tenant(tenant)

    async def drop_tenant(self) -> TenantDrop:
        """Remove everything of this store's tenant and close the store: its schema,
        database or file, with every table in it (events, snapshots, deletions, tags, keys,
        retention runs, read models kept there), and the archive folders its retention
        runs wrote. Other tenants are untouched.

        Refused (`InvalidTenant`) for a store of no tenant: the un-tenanted store is never
        dropped. Stop what uses the tenant in other processes first: a SQLite file removed
        under another process is written to in vain, and a PostgreSQL database in use is
        refused (`StoreUnavailable`).

        Example::

            from pathlib import Path

            from eventcraft.eventstore import AsyncEventStore, NewEvent

            url = "sqlite:///tenant-{tenant}.db?tenant=acme"
            acme = await AsyncEventStore.open(url)
            await acme.append("order-1", [NewEvent("Placed", {})])
            dropped = await acme.drop_tenant()
            assert (dropped.place.name, dropped.existed) == ("tenant-acme.db", True)
            assert not Path("tenant-acme.db").exists()
        """
        if self._place is None:
            raise InvalidTenant(
                "this store is no tenant's: drop_tenant removes a tenant's store, never the "
                "un-tenanted store (drop a tenant with store.for_tenant(tenant).drop_tenant())"
            )
        if True:  # ASYNC
            runs = await asyncio.to_thread(self.retention.runs)
        else:
            runs = self.retention.runs()
        await self.close()
        archives = [run.archive for run in runs]
        if True:  # ASYNC
            return await asyncio.to_thread(tenant_places.drop, self._place, archives)
        else:
            return tenant_places.drop(self._place, archives)

    async def close(self) -> None:
        await self._backend.close()
        self._shredder.close()
        if self._retention is not None:
            self._retention.close()
        if self._tenancy is not None:
            await self._tenancy.close()

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


T = TypeVar("T")
C = TypeVar("C")
S = TypeVar("S", RecordedEvent, EncodedEvent)

if True:  # ASYNC

    async def _each(events: Iterable[T]) -> AsyncIterator[T]:
        for event in events:
            yield event

    async def _lists(items: AsyncIterator[T], size: int) -> AsyncIterator[list[T]]:
        """`items` in lists of `size` (the last one shorter)."""
        chunk: list[T] = []
        async for item in items:
            chunk.append(item)
            if len(chunk) == size:
                yield chunk
                chunk = []
        if chunk:
            yield chunk

    async def _threaded(items: Iterator[T]) -> AsyncIterator[T]:
        """`items`, each made in a thread: files read by pyarrow, off the event loop."""
        while (item := await asyncio.to_thread(next, items, None)) is not None:
            yield item

    async def _flat(chunks: AsyncIterator[list[T]]) -> AsyncIterator[T]:
        async for chunk in chunks:
            for item in chunk:
                yield item

else:
    _each = iter

    def _lists(items: Iterator[T], size: int) -> Iterator[list[T]]:
        """`items` in lists of `size` (the last one shorter), each taken in C."""
        return iter(functools.partial(_taken, items, size), [])

    def _taken(items: Iterator[T], size: int) -> list[T]:
        return list(itertools.islice(items, size))

    def _flat(chunks: Iterator[list[T]]) -> Iterator[T]:
        # Handed out by C, no generator frame an event.
        return itertools.chain.from_iterable(chunks)


async def _closed(items: AsyncIterator[Any]) -> None:
    """`items` closed if it can be: a read left before its end holds nothing after."""
    close = getattr(items, "aclose", None)
    if close is not None:
        await close()


def _position_of(event: RecordedEvent | EncodedEvent) -> int:
    """An event's position; 0 for an `EncodedEvent`, which has none."""
    return event.position if isinstance(event, RecordedEvent) else 0
