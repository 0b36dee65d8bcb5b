"""The rows of a `COPY ... TO STDOUT`, taken from libpq a thousand at a time.

psycopg's `Copy` hands over one row per call, each through the connection's
wait loop: about 1.3 us a row, half of what an export spends on an event.
Here one pass of that loop takes every row libpq holds already (up to
`MOST_ROWS`), and waits for the socket only when it holds none: the rows
and their order are the ones `Copy` would give, at a fraction of the cost.

It steps inside psycopg's copy as its own `copy_from` generator does
(`psycopg/generators.py`): rows with `get_copy_data`, the socket waited on
with `WAIT_R`, the final result with `fetch_many`, then the `Copy` marked
finished, so that leaving its block reads nothing more. Pinned below 3.4 in
pyproject.toml; the store's conformance suite reads every COPY through here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
from psycopg import errors, generators
from psycopg.abc import Buffer, PQGen
from psycopg.pq.abc import PGconn

T = TypeVar("T")

MOST_ROWS = 2000
"""Rows taken in one pass: the caller turns them into events between passes."""


def copied(
    conn: psycopg.Connection[Any], query: str, params: Any, row: Callable[[Buffer], T]
) -> list[T]:
    """`row` of each row the COPY `query` sends, in order."""
    made: list[T] = []
    with conn.cursor().copy(query, params) as copy:
        while True:
            rows, ended = conn.wait(_rows(conn.pgconn))
            made += map(row, rows)
            if ended:
                copy._finished = True  # the final result is read: nothing left for its exit
                return made


async def copied_async(
    conn: psycopg.AsyncConnection[Any], query: str, params: Any, row: Callable[[Buffer], T]
) -> list[T]:
    """As `copied`, on an async connection."""
    made: list[T] = []
    async with conn.cursor().copy(query, params) as copy:
        while True:
            rows, ended = await conn.wait(_rows(conn.pgconn))
            made += map(row, rows)
            if ended:
                copy._finished = True
                return made


def _rows(pgconn: PGconn) -> PQGen[tuple[list[Buffer], bool]]:
    """The rows libpq holds (waiting for some if it holds none), and whether the copy
    ended, its final result read."""
    rows: list[Buffer] = []
    while len(rows) < MOST_ROWS:
        nbytes, data = pgconn.get_copy_data(1)
        if nbytes > 0:
            rows.append(data)
        elif nbytes == 0:  # nothing more without reading the socket
            if rows:
                return rows, False
            while not (yield generators.WAIT_R):
                continue
            pgconn.consume_input()
        else:  # the end of the copy, or an error: its result says which
            results = yield from generators.fetch_many(pgconn)
            if len(results) != 1 or results[0].status != generators.COMMAND_OK:
                raise errors.error_from_result(results[-1], encoding=pgconn._encoding)
            return rows, True
    return rows, False
