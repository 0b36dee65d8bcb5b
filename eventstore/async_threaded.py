"""An async backend over a synchronous one: SQLite in a worker thread, memory in place.

Here async wraps sync, where elsewhere the sync code is generated from the
async (`scripts/async_to_sync.py`), for:

- SQLite has no asynchronous driver: Python's `sqlite3` blocks, and an
  "async" SQLite library (aiosqlite) is itself a thread per connection that
  each statement is handed to. A SQLite backend written async would hand
  over every statement; this hands over each call of the store once.
- A store's SQLite connection runs one statement at a time under its lock
  anyway, so one worker thread of the store's own costs no parallelism,
  and every call of the store runs on that thread, in the order awaited.
- The sync backend is the one `EventStore` uses, with its SQL, its
  transactions and its file locking: the async store cannot drift from it.

The memory backend never waits on I/O: its calls run on the loop directly
(`in_place`), with no thread to hand them to.

Each method is the sync backend's of the same name, made by `_awaited` or
`_drained` from the port's (`port.Backend`), whose signature it has; only a
read of JSON chunks and closing are written out. `wait_for_events` is the
async port's: it polls on the loop, where the sync backend's wait would hold
the worker thread, and every call behind it, until an event came.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, Concatenate, ParamSpec, TypeVar

from .async_port import AsyncBackend
from .errors import STORE_CLOSED, StoreUnavailable
from .json_lines import JsonLines
from .port import Backend

T = TypeVar("T")
P = ParamSpec("P")
F = TypeVar("F", bound=Callable[..., Any])

CHUNK = 1000
"""Events a read hands from the worker thread to the loop at a time."""


def _awaited(
    method: Callable[Concatenate[Backend, P], T],
) -> Callable[Concatenate[ThreadedBackend, P], Coroutine[Any, Any, T]]:
    """The sync backend's `method`, run on the worker (or in place) and awaited."""
    name = method.__name__

    async def call(self: ThreadedBackend, /, *args: P.args, **kwargs: P.kwargs) -> T:
        function: Callable[P, T] = getattr(self.backend, name)
        if self._worker is None and not self._closed:
            return function(*args, **kwargs)  # in place: without `_run`'s coroutine
        return await self._run(function, *args, **kwargs)

    return _named(call, method)


def _drained(
    method: Callable[Concatenate[Backend, P], Iterator[T]],
) -> Callable[Concatenate[ThreadedBackend, P], AsyncIterator[T]]:
    """The sync backend's read `method`, its items taken on the worker `CHUNK` at a time."""
    name = method.__name__

    def call(self: ThreadedBackend, /, *args: P.args, **kwargs: P.kwargs) -> AsyncIterator[T]:
        return self._drain(partial(getattr(self.backend, name), *args, **kwargs))

    return _named(call, method)


def _named(call: F, method: Callable[..., Any]) -> F:
    """`call`, named and documented as the port's `method` (whose signature it has)."""
    call.__qualname__ = f"ThreadedBackend.{method.__name__}"
    functools.update_wrapper(call, method, assigned=("__name__", "__doc__"), updated=())
    return call


class ThreadedBackend(AsyncBackend):
    """`backend`'s calls awaited; on a worker thread unless `in_place`."""

    def __init__(self, backend: Backend, *, in_place: bool = False) -> None:
        self.backend = backend
        self._worker = (
            None if in_place else ThreadPoolExecutor(1, thread_name_prefix="eventcraft-store")
        )
        self._closed = False

    async def _run(self, function: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """`function(*args, **kwargs)`, on the worker unless in place."""
        if self._closed:
            raise StoreUnavailable(STORE_CLOSED)
        if self._worker is None:
            return function(*args, **kwargs)
        call = partial(function, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(self._worker, call)

    async def _drain(self, start: Callable[[], Iterator[T]]) -> AsyncIterator[T]:
        """The items of the iterator `start()` makes, taken from it on the worker."""
        iterator = await self._run(start)
        while True:
            chunk = await self._run(_take, iterator)
            for item in chunk:
                yield item
            if len(chunk) < CHUNK:
                return

    append = _awaited(Backend.append)
    append_many = _awaited(Backend.append_many)
    read_stream = _drained(Backend.read_stream)
    read_all = _drained(Backend.read_all)
    read_query = _awaited(Backend.read_query)
    count_events = _awaited(Backend.count_events)
    count_types = _awaited(Backend.count_types)
    read_stream_encoded = _drained(Backend.read_stream_encoded)
    read_all_encoded = _drained(Backend.read_all_encoded)
    high_water_mark = _awaited(Backend.high_water_mark)
    read_event = _awaited(Backend.read_event)
    now = _awaited(Backend.now)
    log_status = _awaited(Backend.log_status)
    stream_version = _awaited(Backend.stream_version)
    list_streams = _drained(Backend.list_streams)
    save_snapshot = _awaited(Backend.save_snapshot)
    load_snapshot = _awaited(Backend.load_snapshot)
    delete_stream = _awaited(Backend.delete_stream)
    stream_deletion = _awaited(Backend.stream_deletion)
    placed_deletions = _awaited(Backend.placed_deletions)

    async def read_all_json(
        self, *, after: int, until: int | None, categories: Sequence[str] | None
    ) -> AsyncIterator[JsonLines]:
        # A chunk a trip to the worker: each holds thousands of lines already.
        lines = await self._run(
            self.backend.read_all_json, after=after, until=until, categories=categories
        )
        while (chunk := await self._run(next, lines, None)) is not None:
            yield chunk

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._worker is None:
            self.backend.close()
            return
        try:
            await asyncio.get_running_loop().run_in_executor(self._worker, self.backend.close)
        finally:
            self._worker.shutdown(wait=False)


def _take(iterator: Iterator[T]) -> list[T]:
    return list(itertools.islice(iterator, CHUNK))
