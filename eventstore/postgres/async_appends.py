"""Appends from many tasks, sent together: the async store's group send.

A call of the append function costs the server little and the client a
round trip plus, in Python, the work of psycopg's async machinery and of the
event loop for every statement. With a hundred tasks appending at once, that
client work, on one thread, is the limit. So appends queue here, and a few
sender tasks (at most one per pooled connection) each take a share of what is
queued and send it in one pipeline, one call of the function per append, each followed
by a Sync: every append is still a transaction of its own, committed or
refused alone, in the order sent, exactly as if sent one by one. A lone
caller's append goes at once, alone, in the same exchange.

The exchange talks to libpq as `wire.py` does, with the same prepared
statement, waiting on the loop instead of in `select`.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Sequence
from functools import partial
from typing import Any

import psycopg
from psycopg import pq
from psycopg.errors import error_from_result

from .wire import _PREPARE, _STATEMENT, REPLY_TIMEOUT, _is_sync

Conn = psycopg.AsyncConnection[Any]
Answer = str | psycopg.Error
"""The function's text result, or the server's refusal of that one append."""

MOST_AT_ONCE = 16
"""Most appends one sender sends in one pipeline.

A sender takes its share of what is queued, not all of it: the appends of one
pipeline run one after another on the server, each waiting for its commit to
reach the disk, where those on other connections commit together (PostgreSQL
flushes the log once for all the commits waiting). Spread over the senders,
a hundred appends cost a few flushes, not a hundred."""

_prepared: weakref.WeakSet[Conn] = weakref.WeakSet()


class AppendQueue:
    """Appends waiting to be sent, and the senders that send them."""

    def __init__(self, run: Any, senders: int, notify: bytes) -> None:
        self._run = run
        self._notify = notify
        """`AsyncPostgresBackend._run`: a call on a pooled connection, errors translated."""
        self._most_senders = senders
        self._senders: set[asyncio.Task[None]] = set()
        self._queued: list[tuple[Sequence[bytes], asyncio.Future[Answer]]] = []
        self._inline = 0
        """Appends being sent by their own task, not a sender's."""

    async def append(self, params: Sequence[bytes]) -> Answer:
        """The answer to one call of the append function with `params`.

        Raises `psycopg.OperationalError` when the connection failed with the
        append sent or not (the caller resends, as after any lost connection).
        """
        if not self._senders and not self._inline:
            # Nothing in flight: send it from this task, sparing a sender's start.
            self._inline += 1
            try:
                answers: list[Answer] = await self._run(
                    partial(append_many, calls=[params], notify=self._notify)
                )
            finally:
                self._inline -= 1
            return answers[0]
        answer: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._queued.append((params, answer))
        if len(self._senders) < self._most_senders:
            sender = asyncio.create_task(self._send(), name="eventcraft-appends")
            self._senders.add(sender)
            sender.add_done_callback(self._senders.discard)
        return await answer

    async def close(self) -> None:
        if self._senders:
            await asyncio.wait(self._senders)

    async def _send(self) -> None:
        while self._queued:
            share = -(-len(self._queued) // self._most_senders)  # rounded up
            size = min(MOST_AT_ONCE, share)
            taken = self._queued[:size]
            del self._queued[:size]
            taken = [(params, answer) for params, answer in taken if not answer.cancelled()]
            if not taken:
                continue
            calls = [params for params, _ in taken]
            try:
                answers = await self._run(partial(append_many, calls=calls, notify=self._notify))
            except BaseException as error:  # every append of the pipeline shares its fate
                for _, answer in taken:
                    if not answer.done():
                        answer.set_exception(error)
                if not isinstance(error, Exception):
                    raise
                continue
            for (_, answer), result in zip(taken, answers, strict=True):
                if not answer.done():
                    answer.set_result(result)


async def append_many(conn: Conn, calls: Sequence[Sequence[bytes]], notify: bytes) -> list[Answer]:
    """Call the append function once per entry of `calls`, each in its own transaction,
    all in one pipeline, then `notify`; each call's text result or its error, in order.

    The NOTIFY goes after the last append's Sync, so after every commit, in a
    transaction of its own (`wire.py` says why); its reply is left on the
    connection for `finish_outstanding` to read when the pool lends it again.
    """
    if conn not in _prepared:
        await finish_outstanding(conn)
        await conn.execute(_PREPARE)
        _prepared.add(conn)
    answers = await _exchange(conn, calls, notify)
    unprepared = [
        index
        for index, answer in enumerate(answers)
        if isinstance(answer, psycopg.errors.InvalidSqlStatementName)
    ]
    if unprepared:  # the session lost its prepared statements: prepare, send those again
        # (psycopg deallocates all of a session's statements after a failed transaction)
        await finish_outstanding(conn)
        await conn.execute(_PREPARE)
        again = await _exchange(conn, [calls[index] for index in unprepared], notify)
        for index, answer in zip(unprepared, again, strict=True):
            answers[index] = answer
    return answers


async def _exchange(conn: Conn, calls: Sequence[Sequence[bytes]], notify: bytes) -> list[Answer]:
    pgconn = conn.pgconn
    answers: list[Answer] = []
    # The last exchange's NOTIFY may still be unanswered: its reply is read after
    # these appends are sent, so that they never wait for it.
    outstanding = pgconn.pipeline_status != pq.PipelineStatus.OFF
    try:
        if not outstanding:
            pgconn.enter_pipeline_mode()
        for params in calls:
            pgconn.send_query_prepared(_STATEMENT, params)
            pgconn.pipeline_sync()
        pgconn.send_query_params(notify, None)
        pgconn.pipeline_sync()
        while pgconn.flush():
            await _ready(conn, write=True)
            pgconn.consume_input()
        if outstanding:
            while not _is_sync(await _next_result(conn)):
                pass  # the last exchange's NOTIFY: nobody waits on its outcome
        for _ in calls:
            result = await _next_result(conn)
            assert result is not None
            while not _is_sync(await _next_result(conn)):
                pass  # the end of this append's results, then its Sync
            if result.status == pq.ExecStatus.TUPLES_OK:
                value = result.get_value(0, 0)
                assert value is not None
                answers.append(bytes(value).decode())
            else:
                answers.append(error_from_result(result, encoding=conn.info.encoding))
    except BaseException as error:
        # Cut off mid-exchange (an error, a cancellation): what was read is unknown.
        await conn.close()
        if isinstance(error, OSError | AssertionError):
            raise psycopg.OperationalError(f"PostgreSQL connection failed: {error}") from error
        raise
    return answers


async def finish_outstanding(conn: Conn) -> None:
    """Read what `append_many` left unread on `conn` (its NOTIFY's reply), if anything.

    Raises `OperationalError` (and closes `conn`) if the connection fails.
    """
    pgconn = conn.pgconn
    if pgconn.pipeline_status == pq.PipelineStatus.OFF:
        return
    try:
        while not _is_sync(await _next_result(conn)):
            pass  # the NOTIFY's result: nobody waits on its outcome
        pgconn.exit_pipeline_mode()
    except BaseException as error:
        await conn.close()
        if isinstance(error, OSError | AssertionError):
            raise psycopg.OperationalError(f"PostgreSQL connection failed: {error}") from error
        raise


async def _next_result(conn: Conn) -> pq.abc.PGresult | None:
    pgconn = conn.pgconn
    while pgconn.is_busy():
        await _ready(conn, write=False)
        pgconn.consume_input()
    return pgconn.get_result()


async def _ready(conn: Conn, *, write: bool) -> None:
    """Until the connection's socket can be read, or, with `write`, written."""
    loop = asyncio.get_running_loop()
    ready = loop.create_future()
    fileno = conn.pgconn.socket

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    if write:
        loop.add_writer(fileno, wake)
    else:
        loop.add_reader(fileno, wake)
    try:
        async with asyncio.timeout(REPLY_TIMEOUT):
            await ready
    except TimeoutError:
        raise psycopg.OperationalError(
            f"no reply from PostgreSQL in {REPLY_TIMEOUT:.0f} s"
        ) from None
    finally:
        if write:
            loop.remove_writer(fileno)
        else:
            loop.remove_reader(fileno)
