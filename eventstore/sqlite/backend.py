"""The embedded backend: one SQLite file, shared by threads and processes.

Writers take SQLite's write lock up front (BEGIN IMMEDIATE) and choose their
positions inside it, so commits become visible in position order and
positions have no gaps: readers need no gap rule here (see `schema.py`).
WAL mode lets readers run while a writer writes.

Durability: by default every commit is synced to disk, so an append that
returned survives a power cut; `?synchronous=normal` in the URL syncs at
checkpoints only, and an append then survives the application's crash but
not the machine's (`sqlite/options.py` says what each setting keeps).
"""

from __future__ import annotations

import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from ..arguments import AppendCall
from ..collector import collector_paused
from ..deletion import StreamDeletion
from ..encoding import PreparedBatch, decode
from ..errors import (
    STORE_CLOSED,
    AppendConditionFailed,
    EventStoreError,
    StoreUnavailable,
    StreamTombstoned,
    WrongExpectedVersion,
)
from ..events import (
    ANY,
    NO_STREAM,
    AppendResult,
    EncodedEvent,
    EncodedRecord,
    RecordedEvent,
    StreamInfo,
    StreamState,
    encoded_events,
)
from ..group_commit import GroupCommit, interrupted_append
from ..idempotency import StoredId, resolve_stored_appends
from ..paging import paged
from ..port import Backend
from ..query import AppendCondition, Query, QueryResult, covered
from ..snapshot import PreparedSnapshot, Snapshot, beyond_the_stream
from ..sql import deletion, schema
from ..type_counts import TypeCount, type_counts
from . import query as sqlite_query
from . import schema as sqlite_schema
from . import statements as sql
from .options import SQLiteTarget
from .rows import (
    encoded_page,
    event_id,
    event_rows,
    id_forms,
    recorded_page,
    tag_rows,
)
from .transaction import immediate

PAGE = 1000
"""Rows a read fetches under the connection lock before yielding them."""

_ID_CHUNK = 400  # ids per lookup: twice as many parameters (bytes and text) stay under 999

MOST_EVENTS = 64
"""The most events a group holds (a larger member goes alone): single events and small
batches from many threads share commits, and two batches of more than 32 events never
do (`group_commit.py`). Four threads appending 50-event batches made 11% more with it than
with groups of up to 32 batches, as many as with grouping off (interleaved runs)."""

T = TypeVar("T")
R = TypeVar("R")


def _events_in(member: Sequence[AppendCall]) -> int:
    return sum(len(call.batch) for call in member)


class SQLiteBackend(Backend):
    def __init__(self, target: SQLiteTarget, *, group_commit: bool = True) -> None:
        self.path = path = target.path
        self._closed = False
        self._lock = threading.RLock()
        # One writer at a time: a second group would only wait for the first.
        self._groups = (
            GroupCommit(
                self._write_group,
                most_groups=1,
                events_of=_events_in,
                most_events=MOST_EVENTS,
                interrupted=interrupted_append,
            )
            if group_commit
            else None
        )
        try:
            self._conn = sqlite3.connect(
                path, isolation_level=None, check_same_thread=False, timeout=60.0
            )
            for pragma in target.pragmas():
                self._conn.execute(pragma)
            self._create_schema()
        except sqlite3.Error as error:
            raise StoreUnavailable(
                f"cannot open SQLite event store at {path!r}: {error}"
            ) from error

    @classmethod
    def from_url(
        cls, url: str, *, group_commit: bool = True, create_folders: bool = False
    ) -> SQLiteBackend:
        """The store at `url`; its file is made if missing, in a folder that is there
        unless `create_folders`: a mistyped path is not a new, empty store."""
        target = SQLiteTarget.from_url(url)
        if target.path != ":memory:":
            folder = Path(target.path).parent
            if create_folders:
                folder.mkdir(parents=True, exist_ok=True)
            elif not folder.is_dir():
                raise StoreUnavailable(
                    f"there is no folder {str(folder)!r} for its file "
                    "(open it with create_folders=True to make the folders)"
                )
        return cls(target, group_commit=group_commit)

    def _create_schema(self) -> None:
        # Looked at first without a write lock: a store opened again and again (a tenant's,
        # among more tenants than may be open) waits for no writer of its file.
        existing = self._existing()
        if sqlite_schema.ddl(existing):
            with self._lock, immediate(self._conn):
                existing = self._existing()  # as it is now that no one else writes
                for statement in sqlite_schema.ddl(existing):
                    self._conn.execute(statement)
        self._text_ids = schema.TEXT_IDS in existing
        """Older rows hold ids as text: lookups ask for both forms, and an append checks its
        ids against the text ones, which the unique index on ids cannot tell apart."""

    def _existing(self) -> frozenset[str]:
        return frozenset(row[0] for row in self._conn.execute(sql.EXISTING, sql.EXISTING_NAMES))

    def append(
        self,
        stream_id: str,
        category: str,
        batch: PreparedBatch,
        expected: int | StreamState,
        condition: AppendCondition | None = None,
    ) -> AppendResult:
        return self.append_many([AppendCall(stream_id, category, batch, expected, condition)])[0]

    def append_many(self, calls: Sequence[AppendCall]) -> list[AppendResult]:
        # Encoded on the caller's thread, before it joins a group: an event that cannot
        # be encoded fails its caller alone, and the group's leader only writes.
        for call in calls:
            call.batch.all()
        if self._groups is not None:
            return self._groups.submit(tuple(calls))
        (outcome,) = self._write_group([calls])
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def _write_group(
        self, members: Sequence[Sequence[AppendCall]]
    ) -> list[list[AppendResult] | BaseException]:
        """Write `members` (their events encoded) in one transaction, one commit; each
        member all or nothing.

        A member refused (a wrong version, an id already stored) is rolled back
        to its savepoint alone; once the others have committed, it is answered
        as a retry or with its error.
        """
        try:
            written = self._guard(lambda: self._write_members(members))
        except EventStoreError as failed:
            return [failed] * len(members)
        return [
            self._settled(member, outcome) if isinstance(outcome, Exception) else outcome
            for member, outcome in zip(members, written, strict=True)
        ]

    def _write_members(
        self, members: Sequence[Sequence[AppendCall]]
    ) -> list[list[AppendResult] | Exception]:
        """Each member's results, or the refusal that rolled it back."""
        conn = self._conn
        alone = len(members) == 1  # no savepoint needed: the transaction is the member's
        written: list[list[AppendResult] | Exception] = []
        with self._lock, immediate(conn):
            for member in members:
                if not alone:
                    conn.execute("SAVEPOINT member")
                try:
                    for call in member:  # each against the store before the member
                        self._check(call)
                    written.append([self._write(call) for call in member])
                except (
                    WrongExpectedVersion,
                    AppendConditionFailed,
                    StreamTombstoned,
                    sqlite3.IntegrityError,
                ) as error:
                    written.append(error)
                    conn.execute("ROLLBACK" if alone else "ROLLBACK TO member")
                    if alone:
                        return written
                if not alone:
                    conn.execute("RELEASE member")
        return written

    def _write(self, call: AppendCall) -> AppendResult:
        """Insert one append's rows in the open transaction, or raise its refusal."""
        conn = self._conn
        stream_id, category, batch, expected, _ = call
        events = batch.all()
        shown, actual = deletion.sqlite_append_versions(conn, stream_id)  # deleted streams
        if expected is not ANY and shown != (0 if expected is NO_STREAM else expected):
            raise WrongExpectedVersion(stream_id, expected, shown)
        if self._text_ids:
            self._refuse_stored_text_ids(batch.ids)
        first = conn.execute(sql.NEXT_POSITION).fetchone()[0]
        conn.executemany(
            sql.INSERT_EVENT, event_rows(stream_id, category, events, actual, first, batch.timed)
        )
        if batch.tags is not None:
            conn.executemany(sql.INSERT_TAG, tag_rows(events, first))
        if actual == 0:
            conn.execute(sql.INSERT_STREAM, (stream_id, category))
        return AppendResult(actual + len(events), tuple(range(first, first + len(events))))

    def _check(self, call: AppendCall) -> None:
        """Raise `AppendConditionFailed` if an event matching `call`'s condition is stored
        after its position; in the open write transaction, which no other writer can
        enter until it ends."""
        condition = call.condition
        if condition is None:
            return
        statement, params = sqlite_query.first_match(
            condition.fail_if_events_match, condition.after
        )
        found = self._conn.execute(statement, params).fetchone()[0]
        if found is not None:
            raise AppendConditionFailed(
                call.stream_id, condition.fail_if_events_match, condition.after, found
            )

    def _settled(
        self, member: Sequence[AppendCall], error: Exception
    ) -> list[AppendResult] | BaseException:
        """A refused member's original results if it is a retry; otherwise its error."""
        if isinstance(error, StreamTombstoned):
            return error  # even a retry: the stream takes nothing any more
        ids = [id for call in member for id in call.batch.ids]
        try:
            stored = self._guard(lambda: self._stored(ids))
            result = resolve_stored_appends([(c.stream_id, c.batch.ids) for c in member], stored)
        except EventStoreError as failed:
            return failed
        if result is not None:
            return result
        if isinstance(error, EventStoreError):
            return error
        failure = EventStoreError(f"append to stream {member[0].stream_id!r} failed: {error}")
        failure.__cause__ = error
        return failure

    def _refuse_stored_text_ids(self, ids: Sequence[uuid.UUID]) -> None:
        """Raise as the unique index would if one of `ids` is stored in an older row, as text."""
        for start in range(0, len(ids), _ID_CHUNK):
            chunk = [id.hex for id in ids[start : start + _ID_CHUNK]]
            if self._conn.execute(sql.any_stored(len(chunk)), chunk).fetchone():
                raise sqlite3.IntegrityError(f"UNIQUE constraint failed: {sql.E}.id (as text)")

    def _stored(self, ids: Sequence[uuid.UUID]) -> list[StoredId]:
        stored = []
        for start in range(0, len(ids), _ID_CHUNK):
            chunk = id_forms(ids[start : start + _ID_CHUNK], self._text_ids)
            with self._lock:
                stored += [
                    StoredId(event_id(row[0]), row[1], row[2], row[3])
                    for row in self._conn.execute(sql.stored_ids(len(chunk)), chunk)
                ]
        return stored

    def read_stream(
        self, stream_id: str, *, from_version: int | None, backwards: bool, limit: int | None
    ) -> Iterator[RecordedEvent]:
        params = {"stream": stream_id}
        if backwards:
            start = (1 << 62) if from_version is None else from_version
            return self._pages(
                sql.READ_STREAM_BACKWARDS, params, start, _version_before, limit, recorded_page
            )
        return self._pages(
            sql.READ_STREAM_FORWARDS,
            params,
            from_version or 1,
            _version_after,
            limit,
            recorded_page,
        )

    def read_stream_encoded(self, stream_id: str, *, from_version: int) -> Iterator[EncodedEvent]:
        return self._pages(
            sql.READ_STREAM_ENCODED,
            {"stream": stream_id},
            from_version,
            _version_after,
            None,
            encoded_events,
        )

    def read_all(
        self,
        *,
        after: int,
        limit: int | None,
        categories: Sequence[str] | None,
        types: Sequence[str] | None,
    ) -> Iterator[RecordedEvent]:
        query, params = sql.read_all_query(self.high_water_mark(), categories, types)
        return self._pages(query, params, after, _position, limit, recorded_page)

    def count_events(
        self,
        *,
        after: int,
        until: int | None,
        categories: Sequence[str] | None,
        types: Sequence[str] | None,
        limit: int | None,
    ) -> int:
        head = self.high_water_mark()
        query, params = sql.count_query(
            head if until is None else min(until, head), categories, types
        )
        # A negative LIMIT is none on SQLite.
        params.update(start=after, count=-1 if limit is None else limit)
        return self._guard(lambda: int(self._fetch(query, params)[0][0]))

    def count_types(
        self, *, after: int, until: int | None, types: Sequence[str] | None
    ) -> list[TypeCount]:
        head = self.high_water_mark()
        query, params = sql.count_types_query(head if until is None else min(until, head), types)
        params["start"] = after
        return type_counts(self._guard(lambda: self._fetch(query, params)))

    def read_query(self, query: Query, *, after: int, limit: int | None) -> QueryResult:
        head = self.high_water_mark()
        statement, params = sqlite_query.read_query(query, head)
        found = list(self._pages(statement, params, after, _position, limit, recorded_page))
        return covered(found, limit, head, after)

    def read_all_encoded(
        self,
        *,
        after: int,
        until: int | None,
        categories: Sequence[str] | None,
        types: Sequence[str] | None,
    ) -> Iterator[EncodedRecord]:
        head = self.high_water_mark()
        query, params = sql.read_all_query(
            head if until is None else min(until, head), categories, types
        )
        return self._pages(query, params, after, _position, None, encoded_page)

    def _pages(
        self,
        query: str,
        params: dict[str, Any],
        start: int,
        next_start: Callable[[R], int],
        limit: int | None,
        make: Callable[[list[Any]], list[R]],
    ) -> Iterator[R]:
        """Run `query` page by page: its last two parameters are the key to start at and a
        count; `make` turns a page of rows into what is read, `next_start` gives the key
        after the last of those."""

        def fetch(key: int, count: int) -> list[R]:
            with collector_paused():  # why: eventstore/collector.py
                return make(
                    self._guard(
                        lambda: self._fetch(query, {**params, "start": key, "count": count})
                    )
                )

        return paged(fetch, start, next_start, limit, PAGE)

    def _fetch(self, query: str, params: Sequence[Any] | dict[str, Any]) -> list[Any]:
        with self._lock:
            return self._conn.execute(query, params).fetchall()

    def high_water_mark(self) -> int:
        return self._guard(lambda: int(self._fetch(sql.HEAD, ())[0][0]))

    def read_event(self, event_id: uuid.UUID) -> RecordedEvent | None:
        rows = self._guard(lambda: self._fetch(sql.EVENT_BY_ID, (event_id.bytes, event_id.hex)))
        return recorded_page(rows)[0] if rows else None

    def stream_version(self, stream_id: str) -> int:
        rows = self._guard(lambda: self._fetch(sql.STREAM_VERSION, (stream_id,)))
        return int(rows[0][0]) if rows else 0

    def list_streams(
        self, *, category: str | None, after: str | None, limit: int | None
    ) -> Iterator[StreamInfo]:
        query, params = sql.list_streams_query(category, after, limit)
        rows = self._guard(lambda: self._fetch(query, params))
        return iter([StreamInfo(row[0], row[1]) for row in rows])

    def save_snapshot(self, snapshot: PreparedSnapshot) -> None:
        self._guard(lambda: self._save_snapshot(snapshot))

    def _save_snapshot(self, snapshot: PreparedSnapshot) -> None:
        row = (
            snapshot.stream_id,
            snapshot.version,
            snapshot.type,
            snapshot.schema_version,
            snapshot.data.decode(),
            datetime.now(UTC).isoformat(),
        )
        with self._lock:
            # A stream's version only grows: once reached, the check stays true.
            found = self._conn.execute(sql.STREAM_VERSION, (snapshot.stream_id,)).fetchone()
            actual = found[0] if found else 0
            if snapshot.version > actual:
                raise beyond_the_stream(snapshot.stream_id, snapshot.version, actual)
            self._conn.execute(sql.SAVE_SNAPSHOT, row)

    def delete_stream(
        self,
        stream_id: str,
        expected: int | StreamState,
        tombstone: bool,
        deleted_at: datetime | None,
    ) -> StreamDeletion:
        def delete() -> StreamDeletion:
            with self._lock, immediate(self._conn):
                return deletion.sqlite_delete(
                    self._conn, stream_id, expected, tombstone, deleted_at
                )

        return self._guard(delete)

    def stream_deletion(self, stream_id: str) -> StreamDeletion | None:
        with self._lock:
            return self._guard(lambda: deletion.sqlite_deletion(self._conn, stream_id))

    def placed_deletions(self, after: int, until: int) -> list[tuple[int, StreamDeletion]]:
        with self._lock:
            return self._guard(lambda: deletion.sqlite_placed_deletions(self._conn, after, until))

    def load_snapshot(self, stream_id: str) -> Snapshot | None:
        rows = self._guard(lambda: self._fetch(sql.LOAD_SNAPSHOT, (stream_id,)))
        if not rows:
            return None
        stream, version, type_, schema_version, data, saved_at = rows[0]
        return Snapshot(
            stream, version, type_, schema_version, decode(data), datetime.fromisoformat(saved_at)
        )

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._conn.close()

    def _guard(self, call: Callable[[], T]) -> T:
        """Run `call`, turning sqlite3's errors into the store's own."""
        try:
            return call()
        except EventStoreError:
            raise
        except sqlite3.ProgrammingError as error:
            if self._closed:  # used after close(): as every backend says it
                raise StoreUnavailable(STORE_CLOSED) from None
            raise StoreUnavailable(f"SQLite event store {self.path!r}: {error}") from error
        except sqlite3.OperationalError as error:
            raise StoreUnavailable(f"SQLite event store {self.path!r}: {error}") from error


def _version_before(event: RecordedEvent) -> int:
    return event.version - 1


def _version_after(event: RecordedEvent | EncodedEvent) -> int:
    return event.version + 1


def _position(event: RecordedEvent | EncodedRecord) -> int:
    return event.position
