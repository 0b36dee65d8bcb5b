"""A blocking face over `AsyncEventStore`, so that one suite of tests runs on both APIs.

`BlockingEventStore` has `EventStore`'s methods; each runs the async store's
coroutine on a private event loop in a thread of its own and waits for it.
Several threads calling at once have their coroutines run concurrently on
that loop: the conformance suite's waits and appends from other threads
exercise the async store's own concurrency. Arguments are checked in the
caller's thread, as the async store checks them before anything is awaited.

`BlockingEventStore.over(store)` puts the same face on a store of the
caller's, whose coroutines then run on the caller's loop: code that needs a
sync store (the projection runner's worker threads) can use an async one from
other threads, while the loop is free. Its methods must not be called on the
loop's own thread, which they would block: they raise `RuntimeError` there.

Otherwise it is a test device, not a way to use the async store from sync
code: `EventStore` is that.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

from .async_store import AsyncEventStore
from .encoding import MAX_EVENT_BYTES

T = TypeVar("T")
P = ParamSpec("P")
F = TypeVar("F", bound=Callable[..., Any])


def _awaited(
    method: Callable[Concatenate[AsyncEventStore, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[BlockingEventStore, P], T]:
    """The async store's `method` as a blocking one: its coroutine run on the face's loop."""
    name = method.__name__

    def call(self: BlockingEventStore, /, *args: P.args, **kwargs: P.kwargs) -> T:
        coroutine: Coroutine[Any, Any, T] = getattr(self.store, name)(*args, **kwargs)
        return self._wait(coroutine)

    return _named(call, method)


def _drained(
    method: Callable[Concatenate[AsyncEventStore, P], AsyncIterator[T]],
) -> Callable[Concatenate[BlockingEventStore, P], Iterator[T]]:
    """The async store's read `method` as a blocking one: all it reads, read on the loop."""
    name = method.__name__

    def call(self: BlockingEventStore, /, *args: P.args, **kwargs: P.kwargs) -> Iterator[T]:
        items: AsyncIterator[T] = getattr(self.store, name)(*args, **kwargs)
        return self._drain(items)

    return _named(call, method)


def _named(call: F, method: Callable[..., Any]) -> F:
    """`call`, named and documented as the async store's `method` (whose signature it has)."""
    call.__qualname__ = f"BlockingEventStore.{method.__name__}"
    functools.update_wrapper(call, method, assigned=("__name__", "__doc__"), updated=())
    return call


class BlockingEventStore:
    """`EventStore`'s methods, run by an `AsyncEventStore` on a private loop.

    Each is the async store's method of the same name (same arguments, same
    docstring), its coroutine waited for; a read is read to its end on the
    loop, then handed over.

    Example::

        import asyncio

        from eventcraft.eventstore import AsyncEventStore, BlockingEventStore, NewEvent

        async with await AsyncEventStore.open("sqlite:///shop.db") as store:
            await store.append("order-1", [NewEvent("OrderPlaced", {"cents": 1250})])
            blocking = BlockingEventStore.over(store)  # for sync code, in threads of its own
            read = await asyncio.to_thread(lambda: list(blocking.read_stream("order-1")))
            try:
                blocking.stream_version("order-1")  # on the loop's thread, it would block it
            except RuntimeError as error:
                refused = str(error)
        assert [event.type for event in read] == ["OrderPlaced"] and "would block" in refused
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        thread: threading.Thread | None,
        loop_thread: int | None = None,
    ) -> None:
        self._loop = loop
        self._thread = thread
        """The private loop's thread; None when the loop is a caller's."""
        self._loop_thread = loop_thread
        self.store: AsyncEventStore

    @classmethod
    def over(cls, store: AsyncEventStore) -> BlockingEventStore:
        """A blocking face on `store`, for other threads, run on the loop calling this."""
        blocking = cls(asyncio.get_running_loop(), None, threading.get_ident())
        blocking.store = store
        return blocking

    @classmethod
    def open(cls, url: str, *, max_event_bytes: int = MAX_EVENT_BYTES) -> BlockingEventStore:
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="eventcraft-blocking", daemon=True)
        thread.start()
        blocking = cls(loop, thread)
        try:
            blocking.store = blocking._wait(
                AsyncEventStore.open(url, max_event_bytes=max_event_bytes)
            )
        except BaseException:
            blocking._stop()
            raise
        return blocking

    @property
    def url(self) -> str:
        return self.store.url

    @property
    def max_event_bytes(self) -> int:
        return self.store.max_event_bytes

    def _wait(self, coroutine: Coroutine[Any, Any, T]) -> T:
        if threading.get_ident() == self._loop_thread:
            coroutine.close()
            raise RuntimeError("a blocking store's call on its own loop's thread would block it")
        if self._loop.is_closed():
            # Closed by `close()`: the call still reaches the closed async store, on a
            # loop of its own, so that its caller meets what the store says then.
            return asyncio.run(coroutine)
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def _drain(self, events: AsyncIterator[T]) -> Iterator[T]:
        async def collect() -> list[T]:
            return [event async for event in events]

        return iter(self._wait(collect()))

    append = _awaited(AsyncEventStore.append)
    append_many = _awaited(AsyncEventStore.append_many)
    read_stream = _drained(AsyncEventStore.read_stream)
    read_stream_encoded = _drained(AsyncEventStore.read_stream_encoded)
    read_all = _drained(AsyncEventStore.read_all)
    count_events = _awaited(AsyncEventStore.count_events)
    count_types = _awaited(AsyncEventStore.count_types)
    read_query = _awaited(AsyncEventStore.read_query)
    read_all_encoded = _drained(AsyncEventStore.read_all_encoded)
    read_all_json = _drained(AsyncEventStore.read_all_json)
    open_events = _drained(AsyncEventStore.open_events)
    high_water_mark = _awaited(AsyncEventStore.high_water_mark)
    read_event = _awaited(AsyncEventStore.read_event)
    now = _awaited(AsyncEventStore.now)
    log_status = _awaited(AsyncEventStore.log_status)
    wait_for_events = _awaited(AsyncEventStore.wait_for_events)
    stream_version = _awaited(AsyncEventStore.stream_version)
    list_streams = _drained(AsyncEventStore.list_streams)
    save_snapshot = _awaited(AsyncEventStore.save_snapshot)
    load_snapshot = _awaited(AsyncEventStore.load_snapshot)
    delete_stream = _awaited(AsyncEventStore.delete_stream)
    stream_deletion = _awaited(AsyncEventStore.stream_deletion)
    placed_deletions = _awaited(AsyncEventStore.placed_deletions)
    low_water_mark = _awaited(AsyncEventStore.low_water_mark)
    forget = _awaited(AsyncEventStore.forget)

    def close(self) -> None:
        """Close the store and stop the private loop; a face `over` a caller's store
        leaves it open: the caller closes it."""
        if self._thread is not None and self._thread.is_alive():
            try:
                self._wait(self.store.close())
            finally:
                self._stop()

    def _stop(self) -> None:
        assert self._thread is not None
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def __enter__(self) -> BlockingEventStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
