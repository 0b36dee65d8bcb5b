"""Reading what an async pipeline left on a connection: the awaited twin of `wire.py`'s
`finish_outstanding`, and the two steps every awaited exchange below psycopg's cursors
takes (wait for the socket, read the next result). The pool (`async_connections.py`)
reads a lent connection's outstanding reply with it, and so do the async appends, so
neither has to import the other.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
from psycopg import pq

from .wire import REPLY_TIMEOUT, _is_sync

Conn = psycopg.AsyncConnection[Any]


async def finish_outstanding(conn: Conn) -> None:
    """Read what `append_many` left unread on `conn` (its NOTIFY's reply), if anything.

    Raises `OperationalError` (and closes `conn`) if the connection fails.
    """
    pgconn = conn.pgconn
    if pgconn.pipeline_status == pq.PipelineStatus.OFF:
        return
    try:
        while not _is_sync(await next_result(conn)):
            pass  # the NOTIFY's result: nobody waits on its outcome
        pgconn.exit_pipeline_mode()
    except BaseException as error:
        await conn.close()
        if isinstance(error, OSError | AssertionError):
            raise psycopg.OperationalError(f"PostgreSQL connection failed: {error}") from error
        raise


async def next_result(conn: Conn) -> pq.abc.PGresult | None:
    """The next result of `conn`'s pipeline, read as it arrives; None after the last."""
    pgconn = conn.pgconn
    while pgconn.is_busy():
        await until_ready(conn, write=False)
        pgconn.consume_input()
    return pgconn.get_result()


async def until_ready(conn: Conn, *, write: bool) -> None:
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
