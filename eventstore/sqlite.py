"""The embedded backend: one SQLite file, shared by threads and processes.

Writers take SQLite's write lock up front (BEGIN IMMEDIATE) and choose their
positions inside it, so commits become visible in position order and
positions have no gaps: readers need no gap rule here (see `schema.py`).
WAL mode lets readers run while a writer writes.
"""

from __future__ import annotations

import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from . import schema
from .arguments import AppendCall
from .encoding import PreparedBatch, PreparedEvent, decode
from .errors import EventStoreError, StoreUnavailable, UnsupportedStoreURL, WrongExpectedVersion
from .events import (
    ANY,
    EVENT_VERSION,
    NO_STREAM,
    AppendResult,
    EncodedEvent,
    EncodedRecord,
    RecordedEvent,
    StreamInfo,
    StreamState,
    recorded_at_text,
)
from .grouping import GroupCommit
from .idempotency import StoredId, resolve_stored_appends
from .paging import Row, paged
from .port import Backend
from .snapshot import PreparedSnapshot, Snapshot, beyond_the_stream

PAGE = 1000
"""Rows a read fetches under the connection lock before yielding them."""

_ID_CHUNK = 500  # ids per lookup, well under SQLite's bound-parameter limit

E = schema.EVENTS
S = schema.STREAMS
_COLUMNS = "id, stream_id, version, position, type, data, metadata, recorded_at"
_EVENT_BY_ID = f"SELECT {_COLUMNS} FROM {E} WHERE id = ?"

_STREAM_VERSION = f"SELECT coalesce(max(version), 0) FROM {E} WHERE stream_id = ?"
_NEXT_POSITION = f"SELECT coalesce(max(position), 0) + 1 FROM {E}"
_INSERT_EVENT = (
    f"INSERT INTO {E} (position, stream_id, version, id, type, data, metadata, recorded_at, "
    "category) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_STREAM = f"INSERT INTO {S} (stream_id, category) VALUES (?, ?)"
_HEAD = f"SELECT coalesce(max(position), 0) FROM {E}"
_SAVE_SNAPSHOT = (
    f"INSERT INTO {schema.SNAPSHOTS} AS s "
    "(stream_id, version, type, schema_version, data, recorded_at) VALUES (?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (stream_id) DO UPDATE SET version = excluded.version, type = excluded.type, "
    "schema_version = excluded.schema_version, data = excluded.data, "
    "recorded_at = excluded.recorded_at WHERE excluded.version >= s.version"
)
_LOAD_SNAPSHOT = (
    "SELECT stream_id, version, type, schema_version, data, recorded_at "
    f"FROM {schema.SNAPSHOTS} WHERE stream_id = ?"
)

T = TypeVar("T")
R = TypeVar("R")


class SQLiteBackend(Backend):
    def __init__(self, path: str, *, group_commit: bool = True) -> None:
        self.path = path
        self._lock = threading.RLock()
        # One writer at a time: a second group would only wait for the first.
        self._groups = GroupCommit(self._write_group, most_groups=1) if group_commit else None
        try:
            self._conn = sqlite3.connect(
                path, isolation_level=None, check_same_thread=False, timeout=60.0
            )
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA busy_timeout = 60000")
            self._create_schema()
        except sqlite3.Error as error:
            raise StoreUnavailable(
                f"cannot open SQLite event store at {path!r}: {error}"
            ) from error

    @classmethod
    def from_url(cls, url: str, *, group_commit: bool = True) -> SQLiteBackend:
        prefix = "sqlite:///"
        if not url.startswith(prefix) or len(url) == len(prefix):
            raise UnsupportedStoreURL(
                f"a SQLite store URL is sqlite:///relative/path.db or sqlite:////abs/path.db, "
                f"not {url!r}"
            )
        path = url[len(prefix) :].split("?", 1)[0]
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        return cls(path, group_commit=group_commit)

    def _create_schema(self) -> None:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                existing = frozenset(
                    row[0]
                    for row in self._conn.execute(
                        "SELECT name FROM sqlite_master WHERE type = 'table' UNION ALL "
                        "SELECT ? FROM pragma_table_info(?) WHERE name = 'version'",
                        (schema.EARLIER_LAYOUT, S),
                    )
                )
                for statement in schema.ddl("sqlite", existing):
                    self._conn.execute(statement)
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    def append(
        self,
        stream_id: str,
        category: str,
        batch: PreparedBatch,
        expected: int | StreamState,
    ) -> AppendResult:
        call = AppendCall(stream_id, category, batch, expected)
        if self._groups is None:
            return self._one_member(call)[0]
        return self._groups.submit((call,))[0]

    def append_many(self, calls: Sequence[AppendCall]) -> list[AppendResult]:
        if self._groups is None:
            return self._one_member(*calls)
        return self._groups.submit(tuple(calls))

    def _one_member(self, *calls: AppendCall) -> list[AppendResult]:
        (outcome,) = self._write_group([calls])
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def _write_group(
        self, members: Sequence[Sequence[AppendCall]]
    ) -> list[list[AppendResult] | BaseException]:
        """Write `members` in one transaction, one commit; each member all or nothing.

        A member refused (a wrong version, an id already stored) is rolled back
        to its savepoint alone; once the others have committed, it is answered
        as a retry or with its error.
        """
        outcomes: list[list[AppendResult] | BaseException] = []
        rows: list[list[Sequence[PreparedEvent]] | None] = []
        for member in members:
            try:  # encoded before the transaction: a refused event writes nothing
                rows.append([call.batch.all() for call in member])
                outcomes.append([])
            except EventStoreError as error:
                rows.append(None)
                outcomes.append(error)
        refused: dict[int, Exception] = {}
        alone = len(members) == 1
        try:
            self._guard(lambda: self._write_members(members, rows, outcomes, refused, alone))
        except EventStoreError as failed:
            return [failed] * len(members)
        for index, refusal in refused.items():
            outcomes[index] = self._settled(members[index], refusal)
        return outcomes

    def _write_members(
        self,
        members: Sequence[Sequence[AppendCall]],
        rows: list[list[Sequence[PreparedEvent]] | None],
        outcomes: list[list[AppendResult] | BaseException],
        refused: dict[int, Exception],
        alone: bool,
    ) -> None:
        conn = self._conn
        with self._lock:
            conn.execute("BEGIN IMMEDIATE")
            try:
                for index, (member, events) in enumerate(zip(members, rows, strict=True)):
                    if events is None:
                        continue
                    if not alone:
                        conn.execute("SAVEPOINT member")
                    try:
                        outcomes[index] = [
                            self._write(call, batch)
                            for call, batch in zip(member, events, strict=True)
                        ]
                    except (WrongExpectedVersion, sqlite3.IntegrityError) as error:
                        refused[index] = error
                        conn.execute("ROLLBACK" if alone else "ROLLBACK TO member")
                        if alone:
                            return
                    if not alone:
                        conn.execute("RELEASE member")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _write(self, call: AppendCall, events: Sequence[PreparedEvent]) -> AppendResult:
        """Insert one append's rows in the open transaction, or raise its refusal."""
        conn = self._conn
        stream_id, category, batch, expected = call
        row = conn.execute(_STREAM_VERSION, (stream_id,)).fetchone()
        actual = row[0] if row else 0
        if expected is not ANY and actual != (0 if expected is NO_STREAM else expected):
            raise WrongExpectedVersion(stream_id, expected, actual)
        first = conn.execute(_NEXT_POSITION).fetchone()[0]
        conn.executemany(
            _INSERT_EVENT, _event_rows(stream_id, category, events, actual, first, batch.timed)
        )
        if actual == 0:
            conn.execute(_INSERT_STREAM, (stream_id, category))
        return AppendResult(actual + len(events), tuple(range(first, first + len(events))))

    def _settled(
        self, member: Sequence[AppendCall], error: Exception
    ) -> list[AppendResult] | BaseException:
        """A refused member's original results if it is a retry; otherwise its error."""
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

    def _stored(self, ids: Sequence[uuid.UUID]) -> list[StoredId]:
        stored = []
        for start in range(0, len(ids), _ID_CHUNK):
            chunk = [id.hex for id in ids[start : start + _ID_CHUNK]]
            with self._lock:
                stored += [
                    StoredId(uuid.UUID(hex=row[0]), row[1], row[2], row[3])
                    for row in self._conn.execute(
                        f"SELECT id, stream_id, version, position FROM {E} "
                        f"WHERE id IN ({', '.join('?' * len(chunk))})",
                        chunk,
                    )
                ]
        return stored

    def read_stream(
        self, stream_id: str, *, from_version: int | None, backwards: bool, limit: int | None
    ) -> Iterator[RecordedEvent]:
        if backwards:
            start = (1 << 62) if from_version is None else from_version
            query = (
                f"SELECT {_COLUMNS} FROM {E} WHERE stream_id = ? AND version <= ? "
                "ORDER BY version DESC LIMIT ?"
            )
            return self._pages(query, (stream_id,), start, lambda row: row[2] - 1, limit, _event)
        query = (
            f"SELECT {_COLUMNS} FROM {E} WHERE stream_id = ? AND version >= ? "
            "ORDER BY version LIMIT ?"
        )
        return self._pages(
            query, (stream_id,), from_version or 1, lambda row: row[2] + 1, limit, _event
        )

    def read_stream_encoded(self, stream_id: str, *, from_version: int) -> Iterator[EncodedEvent]:
        query = (
            f"SELECT version, type, data, metadata -> '$.{EVENT_VERSION}' FROM {E} "
            "WHERE stream_id = ? AND version >= ? "
            "ORDER BY version LIMIT ?"
        )
        return self._pages(
            query, (stream_id,), from_version, _next_version, None, EncodedEvent._make
        )

    def read_all(
        self,
        *,
        after: int,
        limit: int | None,
        categories: Sequence[str] | None,
        types: Sequence[str] | None,
    ) -> Iterator[RecordedEvent]:
        query, params = _read_all_query(self.high_water_mark(), categories, types)
        return self._pages(query, params, after, lambda row: row[3], limit, _event)

    def read_all_encoded(
        self,
        *,
        after: int,
        until: int | None,
        categories: Sequence[str] | None,
        types: Sequence[str] | None,
    ) -> Iterator[EncodedRecord]:
        head = self.high_water_mark()
        query, params = _read_all_query(
            head if until is None else min(until, head), categories, types
        )
        return self._pages(query, params, after, lambda row: row[3], None, _encoded_record)

    def _pages(
        self,
        query: str,
        params: tuple[Any, ...],
        start: int,
        next_start: Callable[[Row], int],
        limit: int | None,
        make: Callable[[Row], R],
    ) -> Iterator[R]:
        """Run `query` page by page: its last two parameters are the key to start at and a count."""

        def fetch(key: int, count: int) -> list[Any]:
            return self._guard(lambda: self._fetch(query, (*params, key, count)))

        return paged(fetch, start, next_start, make, limit, PAGE)

    def _fetch(self, query: str, params: tuple[Any, ...]) -> list[Any]:
        with self._lock:
            return self._conn.execute(query, params).fetchall()

    def high_water_mark(self) -> int:
        return self._guard(lambda: int(self._fetch(_HEAD, ())[0][0]))

    def read_event(self, event_id: uuid.UUID) -> RecordedEvent | None:
        rows = self._guard(lambda: self._fetch(_EVENT_BY_ID, (event_id.hex,)))
        return _event(rows[0]) if rows else None

    def stream_version(self, stream_id: str) -> int:
        rows = self._guard(lambda: self._fetch(_STREAM_VERSION, (stream_id,)))
        return int(rows[0][0]) if rows else 0

    def list_streams(
        self, *, category: str | None, after: str | None, limit: int | None
    ) -> Iterator[StreamInfo]:
        query = (
            f"SELECT stream_id, (SELECT max(version) FROM {E} e WHERE e.stream_id = s.stream_id) "
            f"FROM {S} s WHERE stream_id > ?"
        )
        params: list[Any] = [after or ""]
        if category is not None:
            query += " AND category = ?"
            params.append(category)
        query += " ORDER BY stream_id LIMIT ?"
        params.append(-1 if limit is None else limit)
        rows = self._guard(lambda: self._fetch(query, tuple(params)))
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
            found = self._conn.execute(_STREAM_VERSION, (snapshot.stream_id,)).fetchone()
            actual = found[0] if found else 0
            if snapshot.version > actual:
                raise beyond_the_stream(snapshot.stream_id, snapshot.version, actual)
            self._conn.execute(_SAVE_SNAPSHOT, row)

    def load_snapshot(self, stream_id: str) -> Snapshot | None:
        rows = self._guard(lambda: self._fetch(_LOAD_SNAPSHOT, (stream_id,)))
        if not rows:
            return None
        stream, version, type_, schema_version, data, saved_at = rows[0]
        return Snapshot(
            stream, version, type_, schema_version, decode(data), datetime.fromisoformat(saved_at)
        )

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def _guard(self, call: Callable[[], T]) -> T:
        """Run `call`, turning sqlite3's errors into the store's own."""
        try:
            return call()
        except EventStoreError:
            raise
        except sqlite3.ProgrammingError as error:  # e.g. used after close()
            raise StoreUnavailable(f"SQLite event store {self.path!r}: {error}") from error
        except sqlite3.OperationalError as error:
            raise StoreUnavailable(f"SQLite event store {self.path!r}: {error}") from error


def _event_rows(
    stream_id: str,
    category: str,
    events: Sequence[PreparedEvent],
    actual: int,
    first: int,
    timed: bool,
) -> list[tuple[Any, ...]]:
    """The rows of an append; with `timed`, events with a `recorded_at` of their own keep it."""
    now = datetime.now(UTC).isoformat()
    return [
        (
            first + offset,
            stream_id,
            actual + offset + 1,
            event.id.hex,
            event.type,
            event.data.decode(),
            event.metadata.decode(),
            event.recorded_at.isoformat() if timed and event.recorded_at else now,
            category,
        )
        for offset, event in enumerate(events)
    ]


def _next_version(row: Row) -> int:
    return int(row[0]) + 1


def _read_all_query(
    last: int, categories: Sequence[str] | None, types: Sequence[str] | None
) -> tuple[str, tuple[object, ...]]:
    """The paged query of the log up to `last` and its parameters but `after` and a count."""
    where: list[str] = []
    params: list[object] = [last]
    if categories is not None:
        where.append(f"category IN ({', '.join('?' * len(categories))})")
        params += categories
    if types is not None:
        where.append(f"type IN ({', '.join('?' * len(types))})")
        params += types
    filters = "".join(f" AND {w}" for w in where)
    query = (
        f"SELECT {_COLUMNS} FROM {E} WHERE position <= ?{filters} AND position > ? "
        "ORDER BY position LIMIT ?"
    )
    return query, tuple(params)


def _encoded_record(row: Row) -> EncodedRecord:
    hex_id = row[0]
    return EncodedRecord(
        row[3],
        f"{hex_id[:8]}-{hex_id[8:12]}-{hex_id[12:16]}-{hex_id[16:20]}-{hex_id[20:]}",
        row[1],
        row[2],
        row[4],
        row[5],
        row[6],
        recorded_at_text(datetime.fromisoformat(row[7])),
    )


def _event(row: Row) -> RecordedEvent:
    return RecordedEvent(
        uuid.UUID(hex=row[0]),
        row[1],
        row[2],
        row[3],
        row[4],
        decode(row[5]),
        decode(row[6]),
        datetime.fromisoformat(row[7]),
    )
