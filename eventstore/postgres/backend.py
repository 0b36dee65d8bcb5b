"""The production backend: PostgreSQL through psycopg 3.

An append is one round trip: a call of the `eventcraft_append` function
(`schema.py`) in autocommit, which checks the expected version, takes the
positions and inserts the events in one transaction, followed by a NOTIFY
for waiting readers (`wire.py` says how, and why not inside it).
Readers follow the ordering rule explained in `schema.py`; `head.py` is
that rule in SQL.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any, TypeVar

import psycopg
from psycopg.rows import RowMaker

from .. import schema
from ..arguments import AppendCall
from ..encoding import PreparedBatch
from ..errors import (
    EventStoreError,
    StoreUnavailable,
)
from ..events import (
    AppendResult,
    EncodedEvent,
    EncodedRecord,
    RecordedEvent,
    StreamInfo,
    StreamState,
)
from ..grouping import GroupCommit
from ..idempotency import StoredId, resolve_stored_ids
from ..log_status import LogStatus
from ..paging import paged
from ..port import Backend
from ..snapshot import PreparedSnapshot, Snapshot, beyond_the_stream
from . import statements as sql
from .connections import ConnectionPool, PostgresTarget
from .group import (
    Answer,
    Member,
    Refusal,
    events_json,
    group_answers,
    group_param,
    lost_races,
    member_json,
    settled,
    stored_ids_param,
)
from .head import log_status, safe_head
from .listener import Listener
from .statements import ANY_TRIES, PAGE, PART, batch_json
from .wire import (
    GROUP_CALL,
    append_and_notify,
    append_in_parts,
    finish_outstanding,
    notify_statement,
)

__all__ = ["PAGE", "PART", "PostgresBackend", "batch_json"]

T = TypeVar("T")
R = TypeVar("R")


def create_schema(conn: psycopg.Connection[Any], schema_name: str | None) -> None:
    """Create the store's tables and functions in `schema_name` (None: the search path)
    where missing, and bring an older layout up to date."""
    with conn.transaction():
        # Processes opening the same new store at once must not race on the DDL.
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"eventcraft:{schema_name}",))
        if schema_name is not None:
            conn.execute(
                psycopg.sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
                    psycopg.sql.Identifier(schema_name)
                )
            )
        existing = frozenset(
            row[0]
            for row in conn.execute(
                "SELECT t FROM unnest(%s::text[]) AS t WHERE to_regclass(t) IS NOT NULL "
                "UNION ALL SELECT %s FROM pg_attribute WHERE attrelid = to_regclass(%s) "
                "AND attname = 'version' AND NOT attisdropped "
                "UNION ALL SELECT %s FROM pg_proc WHERE oid = "
                "to_regprocedure('eventcraft_append(text, text, bigint, text)') "
                "AND prosrc LIKE ALL(%s) "
                "UNION ALL SELECT %s FROM pg_proc WHERE oid = to_regprocedure(%s) "
                "AND prosrc LIKE %s",
                (
                    sorted(schema.TABLES),
                    schema.EARLIER_LAYOUT,
                    schema.STREAMS,
                    schema.APPEND_IS_CURRENT,
                    [f"%{mark}%" for mark in schema.APPEND_CURRENT_MARKS],
                    schema.APPEND_GROUP,
                    f"{schema.APPEND_GROUP}(text)",
                    f"%{schema.APPEND_GROUP_MARK}%",
                ),
            )
        )
        for statement in schema.ddl("postgresql", existing):
            conn.execute(statement.encode())


class PostgresBackend(Backend):
    def __init__(self, target: PostgresTarget, *, group_commit: bool = True) -> None:
        self._pool = ConnectionPool(target)
        self._with_connection(partial(create_schema, schema_name=target.schema))
        self._notify = self._with_connection(notify_statement)
        self._listener = Listener(self._pool)
        self._groups = GroupCommit(self._write_group) if group_commit else None

    @classmethod
    def from_url(cls, url: str, *, group_commit: bool = True) -> PostgresBackend:
        return cls(PostgresTarget.from_url(url), group_commit=group_commit)

    def append(
        self,
        stream_id: str,
        category: str,
        batch: PreparedBatch,
        expected: int | StreamState,
    ) -> AppendResult:
        call = AppendCall(stream_id, category, batch, expected)
        if self._groups is None or len(batch) > PART:
            # A large batch is sent in parts, encoded while the server writes: alone.
            return self._append_alone(call)
        batch.all()  # encoded on the caller's thread, while another group is written
        return self._groups.submit((call,))[0]

    def append_many(self, calls: Sequence[AppendCall]) -> list[AppendResult]:
        member = tuple(calls)
        if self._groups is not None:
            for call in member:
                call.batch.all()
            return self._groups.submit(member)
        (outcome,) = self._write_group([member])
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def _write_group(self, members: Sequence[Member]) -> list[list[AppendResult] | BaseException]:
        """Each member's results or error, the members written in one transaction."""
        if len(members) == 1 and len(members[0]) == 1:
            try:  # a lone append goes exactly as it would ungrouped
                return [[self._append_alone(members[0][0])]]
            except EventStoreError as error:
                return [error]
        outcomes: list[list[AppendResult] | BaseException] = []
        sent: list[Member] = []
        encoded: list[bytes] = []
        for member in members:
            try:
                encoded.append(member_json(member, [events_json(call) for call in member]))
            except EventStoreError as error:  # an event that cannot be encoded: this member
                outcomes.append(error)
                continue
            sent.append(member)
            outcomes.append([])
        written = iter(self._send_group(sent, group_param(encoded)) if sent else ())
        return [next(written) if outcome == [] else outcome for outcome in outcomes]

    def _send_group(
        self, members: Sequence[Member], param: bytes
    ) -> list[list[AppendResult] | BaseException]:
        """Send the group, once more on a new connection if the first one broke (a member
        that did commit is then recognised by its event ids)."""

        def attempt(conn: psycopg.Connection[Any]) -> list[list[AppendResult] | BaseException]:
            text = append_and_notify(conn, (param,), self._notify, GROUP_CALL)
            answers = group_answers(text, len(members))
            return [
                self._settle(conn, member, answer)
                for member, answer in zip(members, answers, strict=True)
            ]

        try:
            return self._pool.run(attempt)
        except psycopg.errors.DeadlockDetected:
            # Members of two groups waiting for each other's streams: one group is
            # refused. Its members go again one by one, which cannot deadlock.
            return [outcome for member in members for outcome in self._write_group([member])]
        except psycopg.OperationalError as error:
            broken = error
        except psycopg.Error as error:
            return [_failure(sql.store_error(error), error)] * len(members)
        try:
            return self._pool.run(attempt)
        except (psycopg.OperationalError, StoreUnavailable) as again:
            return [
                _failure(sql.outcome_unknown(member[0].stream_id, broken, again), broken)
                for member in members
            ]
        except psycopg.Error as error:
            return [_failure(sql.store_error(error), error)] * len(members)

    def _settle(
        self, conn: psycopg.Connection[Any], member: Member, answer: Answer
    ) -> list[AppendResult] | BaseException:
        """A member's results once refused: its earlier ones if it is a retry, the
        results of sending it again if it lost a race at ANY, or its error."""
        for _ in range(ANY_TRIES):
            if not isinstance(answer, Refusal):
                return answer
            finish_outstanding(conn)  # the NOTIFY's reply, before a query of our own
            rows = conn.execute(sql.STORED_IDS, (stored_ids_param(member),)).fetchall()
            outcome = settled(member, answer, [StoredId(*row) for row in rows])
            if outcome is not None:
                return outcome
            param = group_param([member_json(member, [events_json(call) for call in member])])
            text = append_and_notify(conn, (param,), self._notify, GROUP_CALL)
            (answer,) = group_answers(text, 1)
        return lost_races(member[0].stream_id)

    def _append_alone(self, call: AppendCall) -> AppendResult:
        stream_id, _, batch, expected = call
        head = sql.append_head(*call[:2], expected)
        if len(batch) > PART:
            send = self._in_parts(head, batch)
        else:
            params = (*head, batch_json(batch.all(), batch.timed))

            def send(conn: psycopg.Connection[Any]) -> list[str]:
                return [append_and_notify(conn, params, self._notify)]

        def attempt(conn: psycopg.Connection[Any]) -> AppendResult:
            for _ in range(ANY_TRIES):
                try:
                    answers = send(conn)
                except psycopg.errors.UniqueViolation as error:
                    return self._retried_or(conn, stream_id, batch, error)
                except psycopg.DatabaseError as error:
                    conflict = sql.version_conflict(error, stream_id, expected)
                    if conflict is not None:
                        return self._retried_or(conn, stream_id, batch, conflict)
                    # At ANY, another append took the version read: read it again,
                    # unless this very batch is what took it.
                    earlier = self._stored_result(conn, stream_id, batch)
                    if earlier is not None:
                        return earlier
                    continue
                return sql.append_result(answers)
            raise lost_races(stream_id)

        return self._appending(stream_id, attempt)

    def _in_parts(
        self, head: tuple[bytes, ...], batch: PreparedBatch
    ) -> Callable[[psycopg.Connection[Any]], list[str]]:
        """The exchange that writes a large batch PART events at a time, in one transaction."""
        parts: list[tuple[bytes, int]] = []  # encoded once, for every attempt

        def part(index: int) -> tuple[bytes, int] | None:
            if index == len(parts) and index * PART < len(batch):
                events = batch.encoded(index * PART, (index + 1) * PART)
                parts.append((batch_json(events, batch.timed), len(events)))
            return parts[index] if index < len(parts) else None

        return partial(append_in_parts, head=head, part=part, notify=self._notify)

    def _retried_or(
        self,
        conn: psycopg.Connection[Any],
        stream_id: str,
        batch: PreparedBatch,
        error: Exception,
    ) -> AppendResult:
        """The original result if this append is a retry; otherwise raise `error`."""
        result = self._stored_result(conn, stream_id, batch)
        if result is not None:
            return result
        raise sql.not_a_retry(stream_id, error)

    def _stored_result(
        self, conn: psycopg.Connection[Any], stream_id: str, batch: PreparedBatch
    ) -> AppendResult | None:
        rows = conn.execute(sql.STORED_IDS, (batch.ids,)).fetchall()
        return resolve_stored_ids(stream_id, batch.ids, [StoredId(*row) for row in rows])

    def read_stream(
        self, stream_id: str, *, from_version: int | None, backwards: bool, limit: int | None
    ) -> Iterator[RecordedEvent]:
        plan = sql.read_stream_plan(stream_id, from_version, backwards)
        return self._pages(
            plan.query, plan.params, plan.start, plan.next_start, limit, rows=sql.recorded_events
        )

    def read_stream_encoded(self, stream_id: str, *, from_version: int) -> Iterator[EncodedEvent]:
        return self._pages(
            sql.READ_STREAM_ENCODED,
            {"stream": stream_id},
            from_version,
            sql.version_after,
            None,
            rows=sql.encoded_events,
        )

    def read_event(self, event_id: uuid.UUID) -> RecordedEvent | None:
        def find(conn: psycopg.Connection[Any]) -> RecordedEvent | None:
            with conn.cursor(binary=True, row_factory=sql.recorded_events) as cur:
                return cur.execute(sql.EVENT_BY_ID, (event_id,)).fetchone()

        return self._with_connection(find)

    def read_all(
        self,
        *,
        after: int,
        limit: int | None,
        categories: Sequence[str] | None,
        types: Sequence[str] | None,
    ) -> Iterator[RecordedEvent]:
        head = self._safe_head(after)
        query, params = sql.read_all_query(categories, types)
        return self._pages(
            query, params, after, sql.position, limit, rows=sql.recorded_events, upto=head
        )

    def read_all_encoded(
        self,
        *,
        after: int,
        until: int | None,
        categories: Sequence[str] | None,
        types: Sequence[str] | None,
    ) -> Iterator[EncodedRecord]:
        head = self._safe_head(after)
        last = head if until is None else min(until, head)
        query, params = sql.read_all_encoded_query(categories, types)
        for span in sql.encoded_spans(params, after, last):
            yield from self._with_connection(partial(_copied_records, query, span))

    def _safe_head(self, after: int) -> int:
        return self._with_connection(partial(safe_head, after=after))

    def high_water_mark(self) -> int:
        return self._safe_head(0)

    def log_status(self) -> LogStatus:
        return self._with_connection(log_status)

    def wait_for_events(self, after: int, timeout: float) -> bool:
        return self._listener.wait(after, timeout, self.high_water_mark)

    def stream_version(self, stream_id: str) -> int:
        def query(conn: psycopg.Connection[Any]) -> int:
            row = conn.execute(sql.STREAM_VERSION, (stream_id,)).fetchone()
            return int(row[0]) if row else 0

        return self._with_connection(query)

    def list_streams(
        self, *, category: str | None, after: str | None, limit: int | None
    ) -> Iterator[StreamInfo]:
        query, params = sql.list_streams_query(category, after, limit)

        def fetch(conn: psycopg.Connection[Any]) -> list[StreamInfo]:
            return [StreamInfo(*row) for row in conn.execute(query, params)]

        return iter(self._with_connection(fetch))

    def save_snapshot(self, snapshot: PreparedSnapshot) -> None:
        params = sql.snapshot_params(
            snapshot.stream_id,
            snapshot.version,
            snapshot.type,
            snapshot.schema_version,
            snapshot.data,
        )

        def save(conn: psycopg.Connection[Any]) -> int:
            row = conn.execute(sql.SAVE_SNAPSHOT, params).fetchone()
            return int(row[0]) if row else 0

        actual = self._with_connection(save)
        if snapshot.version > actual:
            raise beyond_the_stream(snapshot.stream_id, snapshot.version, actual)

    def load_snapshot(self, stream_id: str) -> Snapshot | None:
        def load(conn: psycopg.Connection[Any]) -> Snapshot | None:
            row = conn.execute(sql.LOAD_SNAPSHOT, (stream_id,)).fetchone()
            return Snapshot(*row) if row else None

        return self._with_connection(load)

    def close(self) -> None:
        self._listener.close()
        self._pool.close()

    def _pages(
        self,
        query: str,
        params: dict[str, Any],
        start: int,
        next_start: Callable[[R], int],
        limit: int | None,
        *,
        rows: Callable[[psycopg.Cursor[Any]], RowMaker[R]],
        upto: int | None = None,
    ) -> Iterator[R]:
        """The rows of `query`, page by page; with `upto`, only those at positions up to it."""

        def fetch(key: int, count: int) -> list[R]:
            def run(conn: psycopg.Connection[Any]) -> list[R]:
                with conn.cursor(binary=True, row_factory=rows) as cur:
                    return cur.execute(query, {**params, "start": key, "count": count}).fetchall()

            return sql.up_to(self._with_connection(run), upto)

        return paged(fetch, start, next_start, sql.same, limit, PAGE)

    def _appending(
        self, stream_id: str, attempt: Callable[[psycopg.Connection[Any]], AppendResult]
    ) -> AppendResult:
        """`attempt`, sent once more on a new connection if the first one broke.

        Safe to resend: a batch that did commit is recognised by its event ids
        and answered with its original result. When the second try cannot be
        made either, whether the first committed is unknown, and the caller is
        told so, with the error that broke the connection as the cause.
        """
        try:
            return self._pool.run(attempt)
        except psycopg.OperationalError as error:
            broken = error
        except psycopg.Error as error:
            raise sql.store_error(error) from error
        try:
            return self._pool.run(attempt)
        except (psycopg.OperationalError, StoreUnavailable) as again:
            raise sql.outcome_unknown(stream_id, broken, again) from broken
        except psycopg.Error as error:
            raise sql.store_error(error) from error

    def _with_connection(self, call: Callable[[psycopg.Connection[Any]], T]) -> T:
        """Run `call` on a pooled connection; once more on a new one if the first broke.

        Every call made through here is safe to repeat: reads, and appends,
        which recognise their own retry.
        """
        for attempt in (1, 2):
            try:
                return self._pool.run(call)
            except psycopg.OperationalError as error:
                if attempt == 2:
                    raise StoreUnavailable(f"PostgreSQL event store: {error}") from error
            except psycopg.Error as error:
                raise sql.store_error(error) from error
        raise AssertionError("unreachable")


def _failure(error: EventStoreError, cause: BaseException) -> EventStoreError:
    error.__cause__ = cause
    return error


def _copied_records(
    query: str, params: dict[str, Any], conn: psycopg.Connection[Any]
) -> list[EncodedRecord]:
    with conn.cursor().copy(query, params) as copy:
        return list(map(sql.copied_record, copy))
