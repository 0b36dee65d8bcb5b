"""Waking async readers on PostgreSQL: `listener.py`'s LISTEN, as a task on the loop.

Not generated from, nor the source of, `listener.py`: that one is a thread
blocked in a read of its connection, ended by closing the connection from
another thread, where this one is a task the loop wakes, ended by cancelling it.

The same channel, payload and rule as the threaded listener: a notification
is a hint to look at the high-water mark again, never the truth, so waiters
also look every `RECHECK` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import psycopg

from ..sql.schema import NOTIFY_CHANNEL
from .listener import _RECONNECT_PAUSE, RECHECK

if TYPE_CHECKING:
    from .async_connections import AsyncConnectionPool


class AsyncListener:
    def __init__(self, pool: AsyncConnectionPool) -> None:
        # Its own connection, not one of the pool's; None: nobody listens (`listener.py`).
        self._target = pool.target.direct_target()
        self._changed = asyncio.Condition()
        self._count = 0
        self._listening = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def wait(self, after: int, timeout: float, mark: Callable[[], Awaitable[int]]) -> bool:
        await self._start()
        deadline = time.monotonic() + timeout
        while True:
            seen = self._count
            # Read after taking `seen`: a commit between the two shows as a new count.
            if await mark() > after:
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            async with self._changed:
                if self._count == seen:
                    # asyncio.timeout, not wait_for: Python 3.11's wait_for can swallow a
                    # cancellation that arrives as the wait ends, and the waiter runs on.
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(min(remaining, RECHECK)):
                            await self._changed.wait()

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _start(self) -> None:
        if self._target is None:
            return
        if self._task is None:
            self._task = asyncio.create_task(self._listen(), name="eventcraft-listener")
        # Until LISTEN runs, a notification could be missed; RECHECK bounds the cost.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(RECHECK):
                await self._listening.wait()

    async def _listen(self) -> None:
        target = self._target
        assert target is not None
        settings = target.session_settings()
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(
                    target.conninfo, autocommit=True, **target.connect_arguments()
                )
                async with conn:
                    if settings is not None:
                        await conn.execute(settings)
                    row = await (await conn.execute("SELECT current_schema()")).fetchone()
                    schema = row[0] if row else None
                    await conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                    self._listening.set()
                    await self._bump()  # anything committed while we were away is worth a look
                    async for note in conn.notifies():
                        if schema is None or note.payload == schema:
                            await self._bump()
            except psycopg.Error:  # a lost connection: waiters fall back to RECHECK meanwhile
                await asyncio.sleep(_RECONNECT_PAUSE)

    async def _bump(self) -> None:
        async with self._changed:
            self._count += 1
            self._changed.notify_all()
