"""The async store's connections: `connections.py`'s pool, awaited.

The same rules as the sync pool: connections in autocommit with the store's
options; an idle one polled for the server's goodbye before it is lent (no
round trip), and the reply to its last NOTIFY read then; one left in a
transaction rolled back, or dropped, on return; a server that cannot be
reached reported at once as `StoreUnavailable`; at most `size` connections,
further callers waiting their turn up to the target's `pool_timeout`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import orjson
import psycopg
from psycopg import pq
from psycopg.types.json import set_json_loads

from ..errors import PoolExhausted, StoreUnavailable
from .async_appends import finish_outstanding
from .connections import PostgresTarget, _alive, _readable

T = TypeVar("T")
Conn = psycopg.AsyncConnection[Any]


class AsyncConnectionPool:
    def __init__(self, target: PostgresTarget, size: int) -> None:
        self.target = target
        self.size = size
        self._slots = asyncio.Semaphore(size)
        self._idle: list[Conn] = []
        self._closed = False

    async def connect(self) -> Conn:
        try:
            conn = await psycopg.AsyncConnection.connect(
                self.target.conninfo, autocommit=True, options=self.target.options()
            )
        except psycopg.Error as error:
            raise StoreUnavailable(f"cannot connect to PostgreSQL: {error}") from error
        set_json_loads(orjson.loads, conn)
        return conn

    async def run(
        self,
        call: Callable[[Conn], Awaitable[T]],
        *,
        settle: bool = True,
        since: float | None = None,
    ) -> T:
        """`call` on a connection in autocommit mode, given back to the pool afterwards;
        the wait for a connection counted from `since` (`time.monotonic()`) if given.

        Without `settle`, the connection may come with a NOTIFY's reply still to
        read: for `send_members`, which reads it after sending its own call.
        """
        if self._closed:
            raise StoreUnavailable("the event store is closed")
        if self._slots.locked():  # a wait, bounded; the common case skips the timer
            timeout = self.target.pool_timeout
            if since is not None:
                timeout = max(0.0, timeout - (time.monotonic() - since))
            try:
                async with asyncio.timeout(timeout):
                    await self._slots.acquire()
            except TimeoutError:
                raise PoolExhausted(self.size, self.target.pool_timeout) from None
        else:
            await self._slots.acquire()
        try:
            return await self._run(call, settle)
        finally:
            self._slots.release()

    async def _run(self, call: Callable[[Conn], Awaitable[T]], settle: bool) -> T:
        conn = None
        while self._idle and conn is None:
            candidate = self._idle.pop()
            # Whatever the server sent since is read first, at no wait when it is at
            # hand: a NOTIFY's reply, or the goodbye of a connection it ended. Left
            # unread, a dead connection in pipeline mode went out to an append.
            if settle or _readable(candidate):  # type: ignore[arg-type]  # pgconn only
                try:
                    await finish_outstanding(candidate)
                except psycopg.OperationalError:
                    continue  # closed: try another
            if not _alive(candidate):  # type: ignore[arg-type]  # reads pgconn only
                await candidate.close()
                continue
            conn = candidate
        if conn is None:
            conn = await self.connect()
        try:
            return await call(conn)
        finally:
            await self._give_back(conn)

    async def _give_back(self, conn: Conn) -> None:
        reusable = not conn.closed and not conn.broken
        # In pipeline mode, a NOTIFY's reply waits for finish_outstanding: no transaction is open.
        settled = reusable and (
            conn.pgconn.pipeline_status != pq.PipelineStatus.OFF
            or conn.info.transaction_status == pq.TransactionStatus.IDLE
        )
        if reusable and not settled:
            try:
                await conn.rollback()
            except psycopg.Error:
                reusable = False
        if reusable and not self._closed:  # never more than size: all are lent here
            self._idle.append(conn)
            return
        await conn.close()

    async def close(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            await conn.close()
