"""The async PostgreSQL backend's appends: alone, in parts, or from many tasks together.

Not generated from `appends.py`, nor it from this: the sync store groups appends
by handing the lead to one caller's thread (`group_commit.GroupCommit`), which
writes the group and settles each refused member on its own connection, where
here tasks queue their appends for sender tasks and each caller settles its
own refusal. What a refused member comes to is decided by the same functions
(`append_group.py`), and both send the same prepared statements (`wire.py`).

An append is one call of the append function (`schema.py`) in autocommit,
sent with the appends of other tasks in one pipeline and followed there, after
their Syncs, by one NOTIFY for waiting readers, as on the sync store (`wire.py`
says why after the commit, never inside it); its reply is read when the
connection is lent again. A batch of more than `PART` events is several calls
in one transaction, each part's expected version the one before it ended at;
its NOTIFY goes from a task of the store's, on a connection of its own, one
for all the batches that committed while it sent the last. Notifications are
hints (`listener.py`): one lost costs a waiter at most `RECHECK`.

A call of the append function costs the server little and the client a
round trip plus, in Python, the work of psycopg's async machinery and of the
event loop for every statement; each commit costs a flush of the server's
log. With a hundred tasks appending at once, both add up. So appends queue
(`AppendQueue`), and a sender task sends what is queued as one call of the
group function (`append_group.py`): one transaction, one commit, each member
still committed or refused alone. A second sender (`group_commit.MOST_GROUPS`,
as on the sync store) starts only while more are queued than one group takes, or
a conditional append is queued (`append_group.hurried`: its read grows stale while it
waits), and stops once neither holds: two groups in flight cost each append
half as much again in CPU as one that takes them all (on 2 cores, 16 tasks:
client 58-64 against 73-83 us an append, server 66-81 against 113-122). A
lone caller's append goes at once, alone, in the exchange the sync store
uses (`wire.py`), as does every append when grouping is off. A sender that
answered a group lets the loop turn once before taking a next group that is
not full, so that the callers it answered are in it.

The exchange talks to libpq as `wire.py` does, with the same prepared
statements, waiting on the loop instead of in `select`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg import pq
from psycopg.errors import error_from_result

from ..arguments import AppendCall
from ..encoding import PreparedBatch
from ..errors import EventStoreError, StoreUnavailable
from ..events import AppendResult
from ..group_commit import MOST_GROUPS, MOST_MEMBERS, another_group_goes
from ..idempotency import StoredId
from . import privileges
from . import statements as sql
from .append_group import (
    Answer,
    Member,
    Refusal,
    events_json,
    group_answers,
    group_param,
    hurried,
    lock_order,
    lost_races,
    member_json,
    refusal_of,
    restored,
    settled,
    stored_ids_param,
)
from .async_wire import finish_outstanding, next_result, until_ready
from .statements import ANY_TRIES, PART, append_head, append_result
from .tag_locks import group_locks, plain
from .wire import APPEND, APPEND_CALL, GROUP_CALL, Prepared, Settings, _is_sync, send_call

if TYPE_CHECKING:
    from .async_connections import AsyncConnectionPool

T = TypeVar("T")
Conn = psycopg.AsyncConnection[Any]

CLOSING = 30.0
"""Longest `close` waits for a NOTIFY being sent."""


class AsyncAppends:
    """Appends on `pool`'s connections, each followed by `notify`; grouped unless
    `group_commit` is off."""

    def __init__(self, pool: AsyncConnectionPool, notify: bytes, *, group_commit: bool) -> None:
        self._pool = pool
        self._notify = notify
        self._queue = AppendQueue(
            partial(pool.run, settle=False, scoped=False),
            pool.size,
            notify,
            grouped=group_commit,
            settings=pool.target.pipeline_settings(),
        )
        self._announcer: asyncio.Task[None] | None = None
        self._unannounced = False

    async def append(self, call: AppendCall) -> AppendResult:
        if len(call.batch) > PART and plain(call):
            return await self._append_large(call)
        (result,) = await self.append_many([call])
        return result

    async def append_many(self, calls: Sequence[AppendCall]) -> list[AppendResult]:
        member = tuple(calls)

        async def attempt() -> list[AppendResult]:
            for _ in range(ANY_TRIES):
                answer = await self._queue.submit(member)
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

    async def close(self) -> None:
        await self._queue.close()
        if self._announcer is not None:
            await asyncio.wait([self._announcer], timeout=CLOSING)

    async def _append_large(self, call: AppendCall) -> AppendResult:
        """A batch of more than `PART` events: several calls in one transaction, alone."""
        stream_id, category, batch, expected, _ = call
        head = sql.append_head(stream_id, category, expected)
        stream, category_text, first = head[0].decode(), head[1].decode(), int(head[2])

        async def send() -> list[str]:
            return await self._pool.run(
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
        rows = await self._pool.run(partial(_fetch_all, query=sql.STORED_IDS, params=params))
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
                await self._pool.run(lambda conn: conn.execute(self._notify))
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
                # Prepared by psycopg for the session, but behind a transaction pooler,
                # whose next transaction may be in another (the pool's scope sets the rest).
                prepare = self._pool.target.pooler != "transaction"
                row = await (await conn.execute(APPEND, params, prepare=prepare)).fetchone()
                assert row is not None
                answers.append(str(row[0]))
                expected = int(answers[-1].split(" ", 1)[0])
        return answers

    async def _appending(self, stream_id: str, attempt: Callable[[], Awaitable[T]]) -> T:
        """`attempt`, sent once more on a new connection if the first one broke
        (as `appends.Appends._appending`: a resent batch recognises itself)."""
        try:
            return await attempt()
        except psycopg.OperationalError as error:
            broken = error
        except psycopg.Error as error:
            raise await self._translated(error) from error
        try:
            return await attempt()
        except (psycopg.OperationalError, StoreUnavailable) as again:
            raise sql.outcome_unknown(stream_id, broken, again) from broken
        except psycopg.Error as error:
            raise await self._translated(error) from error

    async def _translated(self, error: psycopg.Error) -> EventStoreError:
        return await privileges.translated_async(self._pool, error, privileges.APPENDING)


async def _fetch_all(conn: Conn, query: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    return await (await conn.execute(query, params)).fetchall()


_prepared: weakref.WeakSet[Conn] = weakref.WeakSet()
_DONE = (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK)


class Queued:
    """A member waiting to be sent: its appends, their events as JSON, its answer."""

    __slots__ = ("answer", "events", "hurried", "member", "submitted")

    def __init__(self, member: Member, events: list[bytes]) -> None:
        self.member = member
        self.events = events
        self.hurried = hurried(member)
        self.submitted = time.monotonic()
        """When it was queued: a group's wait for a connection counts from its oldest
        member's, which may have waited behind a group that waited in vain."""
        self.answer: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()


class AppendQueue:
    """Appends waiting to be sent, and the senders that send them."""

    def __init__(
        self,
        run: Any,
        senders: int,
        notify: bytes,
        *,
        grouped: bool = True,
        settings: Settings = None,
    ) -> None:
        self._run = run
        """`AsyncConnectionPool.run` without settling: a call on a pooled connection."""
        self._notify = notify
        self._settings = settings
        # A group is one transaction: while more wait than one takes, a second keeps
        # the server busy while the first commits; more would only split the queue.
        self._most_senders = min(senders, MOST_GROUPS)
        self._grouped = grouped
        self._senders: set[asyncio.Task[None]] = set()
        self._queued: list[Queued] = []
        self._inline = 0
        """Members being sent by their own task, not a sender's."""

    async def submit(self, member: Member) -> Answer:
        """The answer to `member`: its results, or the `Refusal` of one of its appends.

        Encodes the member's events first: one that cannot be encoded raises
        `InvalidEvent` here, for this caller alone. Raises the server's error
        when the member could not be written at all, and
        `psycopg.OperationalError` when the connection failed with the member
        sent or not (the caller resends, as after any lost connection).
        """
        events = [events_json(call) for call in member]
        # A sender forgets itself as it ends (`_send`), but one cancelled before it ran
        # is forgotten only by its done-callback, on the loop's next turn: counted as
        # sending, it would leave this member queued with no sender, forever.
        self._senders.difference_update([sender for sender in self._senders if sender.done()])
        if not self._grouped or (not self._senders and not self._inline):
            # Nothing in flight: send it from this task, sparing a sender's start.
            self._inline += 1
            try:
                answers: list[Answer] = await self._run(
                    partial(
                        send_members,
                        members=[(member, events)],
                        notify=self._notify,
                        settings=self._settings,
                    )
                )
            finally:
                self._inline -= 1
            return answers[0]
        queued = Queued(member, events)
        self._queued.append(queued)
        if another_group_goes(
            len(self._senders), self._most_senders, len(self._queued), MOST_MEMBERS, queued.hurried
        ):
            sender = asyncio.create_task(self._send(), name="eventcraft-appends")
            self._senders.add(sender)
            sender.add_done_callback(self._senders.discard)
        return await queued.answer

    async def close(self) -> None:
        if self._senders:
            await asyncio.wait(self._senders)

    async def _send(self) -> None:
        me = asyncio.current_task()
        assert me is not None  # run as a task of its own
        try:
            await self._send_queued()
        finally:
            # At once, not by the done-callback on the loop's next turn: a sender that
            # counted this one as at work could stand down and leave members unsent.
            self._senders.discard(me)

    async def _send_queued(self) -> None:
        while self._queued:
            others = len(self._senders) - 1  # this one is among them until it ends
            hurry = any(queued.hurried for queued in self._queued)
            if not another_group_goes(
                others, self._most_senders, len(self._queued), MOST_MEMBERS, hurry
            ):
                return  # another sender's next group takes what is queued
            taken = self._queued[:MOST_MEMBERS]
            del self._queued[:MOST_MEMBERS]
            taken = [queued for queued in taken if not queued.answer.cancelled()]
            if not taken:
                continue
            members = [(queued.member, queued.events) for queued in taken]
            try:
                answers = await self._run(
                    partial(
                        send_members, members=members, notify=self._notify, settings=self._settings
                    ),
                    since=min(queued.submitted for queued in taken),
                )
            except BaseException as error:  # every member of the group shares its fate
                for queued in taken:
                    if not queued.answer.done():
                        queued.answer.set_exception(error)
                if not isinstance(error, Exception):
                    raise
                continue
            for queued, answer in zip(taken, answers, strict=True):
                if not queued.answer.done():
                    queued.answer.set_result(answer)
            if len(self._queued) < MOST_MEMBERS:
                # One turn of the loop, no timer: the callers just answered queue their
                # next appends and join the next group. Taken at once, a group held only
                # what came meanwhile, often the one append of a caller answered alone:
                # with 16 tasks, every other group was a transaction and a commit for one
                # append. A full group goes at once, while those callers encode (64 tasks).
                await asyncio.sleep(0)


async def send_members(
    conn: Conn,
    members: Sequence[tuple[Member, list[bytes]]],
    notify: bytes,
    settings: Settings = None,
) -> list[Answer]:
    """Send `members` (each with its events' JSON): a lone append in a call of the append
    function, anything more in one call of the group function; then `notify`.

    The NOTIFY goes after the call's Sync, so after the commit, in a
    transaction of its own (`wire.py` says why); its reply is left on the
    connection for `finish_outstanding` to read when the pool lends it again.
    """
    if len(members) == 1 and len(members[0][0]) == 1 and plain(members[0][0][0]):
        (call,), (events,) = members[0]
        params = (*append_head(call.stream_id, call.category, call.expected), events)
        result = await _call(conn, APPEND_CALL, params, notify, settings)
        if isinstance(result, psycopg.Error):
            refusal = refusal_of(result) if isinstance(result, psycopg.DatabaseError) else None
            if refusal is None:
                raise result
            return [refusal]
        return [[append_result([result])]]
    order = lock_order([member for member, _ in members])
    ordered = [members[index] for index in order]
    group = (
        group_param([member_json(member, events) for member, events in ordered]),
        group_locks([member for member, _ in ordered]),
    )
    result = await _call(conn, GROUP_CALL, group, notify, settings)
    if isinstance(result, psycopg.errors.DeadlockDetected) and len(members) > 1:
        # Two groups waited for each other (members of several appends, which keep their
        # own order): this one was refused, whole. Its members go again one by one.
        return [(await send_members(conn, [one], notify, settings))[0] for one in members]
    if isinstance(result, psycopg.Error):
        raise result
    return restored(order, group_answers(result, len(members)))


async def _call(
    conn: Conn,
    statement: Prepared,
    params: Sequence[bytes | None],
    notify: bytes,
    settings: Settings,
) -> str | psycopg.Error:
    """The text result of one call of `statement`, or the server's error: prepared in the
    session, or sent unnamed after `settings`."""
    if settings is not None:
        return await _exchange(conn, statement, params, notify, settings)
    if conn not in _prepared:
        await _prepare(conn)
    result = await _exchange(conn, statement, params, notify, settings)
    if isinstance(result, psycopg.errors.InvalidSqlStatementName):
        # The session lost its prepared statements (psycopg deallocates all of
        # a session's statements after a failed transaction): prepare, send again.
        await _prepare(conn)
        result = await _exchange(conn, statement, params, notify, settings)
    return result


async def _prepare(conn: Conn) -> None:
    await finish_outstanding(conn)
    for statement in (APPEND_CALL, GROUP_CALL):
        with contextlib.suppress(psycopg.errors.InvalidSqlStatementName):
            await conn.execute(f"DEALLOCATE {statement.name.decode()}")
        await conn.execute(statement.prepare)
    _prepared.add(conn)


async def _exchange(
    conn: Conn,
    statement: Prepared,
    params: Sequence[bytes | None],
    notify: bytes,
    settings: Settings,
) -> str | psycopg.Error:
    pgconn = conn.pgconn
    # The last exchange's NOTIFY may still be unanswered: its reply is read after
    # this call is sent, so that it never waits for it.
    outstanding = pgconn.pipeline_status != pq.PipelineStatus.OFF
    try:
        if not outstanding:
            pgconn.enter_pipeline_mode()
        send_call(pgconn, statement, params, settings)
        if settings is None:
            pgconn.pipeline_sync()
        # Behind a transaction pooler, in the append's transaction, all read here (`wire.py`).
        pgconn.send_query_params(notify, None)
        pgconn.pipeline_sync()
        while pgconn.flush():
            await until_ready(conn, write=True)
            pgconn.consume_input()
        if outstanding:
            while not _is_sync(await next_result(conn)):
                pass  # the last exchange's NOTIFY: nobody waits on its outcome
        failed = None
        for _ in settings or ():
            done = await next_result(conn)
            assert done is not None
            while await next_result(conn) is not None:
                pass  # a query's results end with a None
            failed = failed or (None if done.status in _DONE else done)
        result = await next_result(conn)
        assert result is not None
        while not _is_sync(await next_result(conn)):
            pass  # the end of this call's results (and the NOTIFY's, pooled), then its Sync
        if settings is not None:
            pgconn.exit_pipeline_mode()
    except BaseException as error:
        # Cut off mid-exchange (an error, a cancellation): what was read is unknown.
        await conn.close()
        if isinstance(error, OSError | AssertionError):
            raise psycopg.OperationalError(f"PostgreSQL connection failed: {error}") from error
        raise
    result = failed or result
    if result.status == pq.ExecStatus.TUPLES_OK:
        value = result.get_value(0, 0)
        assert value is not None
        return bytes(value).decode()
    return error_from_result(result, encoding=conn.info.encoding)
