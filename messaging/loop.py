"""An asyncio event loop in a thread of its own, for the broker clients.

The store's API is synchronous and the broker clients (aio-pika, nats-py)
are asyncio: each publisher or consumer runs its client on one of these
loops and the relay's or inbox's thread waits on the result, with a timeout,
so a broker that stops answering cannot hang the caller.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class EventLoopThread:
    """A running event loop on a daemon thread; `run` hands it coroutines."""

    def __init__(self, name: str = "eventcraft-messaging") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run `coroutine` on the loop and wait for it; `TimeoutError` after `timeout`.

        On a timeout the coroutine is cancelled, so nothing of it goes on behind
        the caller's back.
        """
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"no answer within {timeout} s") from None

    def close(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self.loop.close()
