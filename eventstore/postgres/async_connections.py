"""Connections to PostgreSQL: a small pool, written once for the sync and async stores.

A store needs only a few connections at once (one per thread or task appending
or reading), so the pool is a list of idle ones: a connection broken by the
server or the network is dropped on return and a new one opened next time.
Every connection the pool opened is kept for reuse, up to its size: a new
one costs the server a process, and that process its caches and plans, which
the store's functions fill again on their first calls.

Connections are in autocommit, with the store's settings (`target.py`): as libpq's
`options` straight to PostgreSQL, as SETs once connected behind a pooler. Behind a
transaction pooler, each call runs in a transaction that sets them again for itself
(`scoped`): the next transaction may be on another of PostgreSQL's sessions. An idle
one is polled for the server's goodbye before it is lent (no round trip); one
left in a transaction is rolled back, or dropped, on return; a server that
cannot be reached is reported at once as `StoreUnavailable`.

A connection may come back with a reply still to read (`wire.py`): it is read
when the connection is next lent, by which time it has arrived.

`PostgresTarget` and the pool's defaults are `target.py`'s, named here too for
the modules that import them from here.
"""

from __future__ import annotations

import asyncio
import select
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import orjson
import psycopg
from psycopg import pq
from psycopg.types.json import set_json_loads

from ..errors import PoolExhausted, StoreUnavailable
from .target import POOL_SIZE, POOL_TIMEOUT, PostgresTarget

if True:  # ASYNC
    from .async_wire import finish_outstanding
else:
    from .wire import finish_outstanding

__all__ = ["POOL_SIZE", "POOL_TIMEOUT", "AsyncConnectionPool", "PostgresTarget"]

T = TypeVar("T")
Conn = psycopg.AsyncConnection[Any]


class AsyncConnectionPool:
    """At most `target.pool_size` connections lent at once; further callers wait for one
    up to `target.pool_timeout` seconds, then get `PoolExhausted`."""

    def __init__(self, target: PostgresTarget) -> None:
        self.target = target
        self.size = target.pool_size
        self._idle: list[Conn] = []
        # Held for a few lines, never across a wait: on the async store, whose callers
        # are tasks of one thread, nobody ever waits for it.
        self._lock = threading.Lock()
        if True:  # ASYNC
            self._slots = asyncio.Semaphore(target.pool_size)
        else:
            self._slots = threading.BoundedSemaphore(target.pool_size)
        self._closed = False
        self._begin = target.transaction_begin()

    async def connect(self) -> Conn:
        try:
            conn = await psycopg.AsyncConnection.connect(
                self.target.conninfo, autocommit=True, **self.target.connect_arguments()
            )
        except psycopg.Error as error:
            raise StoreUnavailable(
                f"cannot connect to PostgreSQL: {error}{_hint(error)}"
            ) from error
        settings = self.target.session_settings()
        if settings is not None:
            try:
                await conn.execute(settings)
            except psycopg.Error as error:
                await conn.close()
                raise StoreUnavailable(f"cannot set up a connection: {error}") from error
        set_json_loads(orjson.loads, conn)
        return conn

    async def run(
        self,
        call: Callable[[Conn], Awaitable[T]],
        since: float | None = None,
        *,
        settle: bool = True,
        scoped: bool = True,
    ) -> T:
        """`call` on a connection in autocommit mode, given back to the pool afterwards;
        the wait for a connection counted from `since` (`time.monotonic()`) if given.
        Behind a transaction pooler, in a transaction of the store's settings (`scoped`),
        unless `scoped` is off: for an append, whose pipeline carries them itself.

        A method rather than a context manager: this wraps every statement the
        store runs, and a generator-based context manager costs more than it.

        Without `settle`, the connection may come with a NOTIFY's reply still to
        read: for the async store's `send_members`, which reads it after sending
        its own call.
        """
        if self._closed:
            raise StoreUnavailable("the event store is closed")
        if True:  # ASYNC
            if self._slots.locked():  # a wait, bounded; the common case skips the timer
                try:
                    async with asyncio.timeout(self._timeout(since)):
                        await self._slots.acquire()
                except TimeoutError:
                    raise PoolExhausted(self.size, self.target.pool_timeout) from None
            else:
                await self._slots.acquire()
        else:
            if not self._slots.acquire(timeout=self._timeout(since)):
                raise PoolExhausted(self.size, self.target.pool_timeout)
        try:
            return await self._run(call, settle, scoped)
        finally:
            self._slots.release()

    def _timeout(self, since: float | None) -> float:
        """The longest a caller waiting since `since` (now if None) may wait still."""
        if since is None:
            return self.target.pool_timeout
        return max(0.0, self.target.pool_timeout - (time.monotonic() - since))

    async def _run(self, call: Callable[[Conn], Awaitable[T]], settle: bool, scoped: bool) -> T:
        conn = None
        while conn is None and (candidate := self._take()) is not None:
            # Whatever the server sent since is read first, at no wait when it is at
            # hand: a NOTIFY's reply, or the goodbye of a connection it ended. Left
            # unread, a dead connection in pipeline mode went out to an append.
            if settle or _readable(candidate):
                try:
                    await finish_outstanding(candidate)
                except psycopg.OperationalError:
                    continue  # closed: try another
            if not _alive(candidate):
                await candidate.close()
                continue
            conn = candidate
        if conn is None:
            conn = await self.connect()
        try:
            if scoped and self._begin is not None:
                return await self.scoped(conn, call)
            return await call(conn)
        finally:
            await self._give_back(conn)

    async def scoped(self, conn: Conn, call: Callable[[Conn], Awaitable[T]]) -> T:
        """`call` on `conn`, lent by this pool: behind a transaction pooler, in one
        transaction that begins with the store's settings (`PostgresTarget.
        transaction_begin`) and commits once `call` returned, or rolls back; elsewhere as
        it is. Whatever `call` runs in transactions of its own nests in it (savepoints)."""
        if self._begin is None:
            return await call(conn)
        await finish_outstanding(conn)  # an append's NOTIFY reply, before a query of ours
        await conn.execute(self._begin)
        try:
            result = await call(conn)
            await finish_outstanding(conn)
        except BaseException:
            if not conn.closed:
                try:
                    await finish_outstanding(conn)
                    await conn.execute(b"ROLLBACK")
                except psycopg.Error:
                    await conn.close()  # in no known state: not lent again
            raise
        await conn.execute(b"COMMIT")
        return result

    def _take(self) -> Conn | None:
        """An idle connection, or None if there is none."""
        with self._lock:
            if self._closed:
                raise StoreUnavailable("the event store is closed")
            return self._idle.pop() if self._idle else None

    async def _give_back(self, conn: Conn) -> None:
        reusable = not conn.closed and not conn.broken
        # In pipeline mode, a reply waits for finish_outstanding: no transaction is open.
        settled = reusable and (
            conn.pgconn.pipeline_status != pq.PipelineStatus.OFF
            or conn.info.transaction_status == pq.TransactionStatus.IDLE
        )
        if reusable and not settled:
            try:
                await conn.rollback()
            except psycopg.Error:
                reusable = False
        with self._lock:
            if reusable and not self._closed:  # never more than pool_size: all are lent here
                self._idle.append(conn)
                return
        await conn.close()

    async def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            await conn.close()


def _hint(error: psycopg.Error) -> str:
    """What to do when `error` is a pooler's refusal of the store's `options`."""
    if "unsupported startup parameter: options" not in str(error):
        return ""
    return (
        " (a pooler such as PgBouncer refuses libpq's options, which the store sets its "
        "session with: add pooler=transaction, or pooler=session, to the store's URL)"
    )


def _alive(conn: Conn) -> bool:
    """False if the server has said something on an idle connection: its goodbye.

    The server sends an idle connection nothing but the error it closes it
    with (a restart, a terminated backend, a session timeout), so one poll of
    the socket tells, before an append is sent into a dead connection and its
    outcome becomes unknown. A connection with a reply outstanding (pipeline
    mode) has something to read, and is judged by reading it.
    """
    if conn.pgconn.pipeline_status != pq.PipelineStatus.OFF:
        return True
    return not _readable(conn)


def _readable(conn: Conn) -> bool:
    """Whether the server has sent `conn` something not yet read (one poll, no wait); a
    connection libpq already knows is lost has its failure to read."""
    try:
        socket = conn.pgconn.socket
    except psycopg.OperationalError:
        return True
    readable, _, _ = select.select([socket], [], [], 0)
    return bool(readable)
