"""What every broker client (publisher or source, RabbitMQ or NATS) does alike: it runs its
asyncio client on an event-loop thread, turns a lost connection into `BrokerUnavailable`
after dropping it (the next call connects again), and closes the loop it owns."""

from __future__ import annotations

import abc
from collections.abc import Coroutine
from typing import Any, TypeVar

from .errors import BrokerUnavailable, MessagingError
from .loop import EventLoopThread

T = TypeVar("T")


class BrokerClient(abc.ABC):
    broker: str
    """The broker as shown in errors and status: kind and address, no password."""
    timeout: float
    connection_errors: tuple[type[BaseException], ...]
    """What a lost connection looks like from this client library."""

    def __init__(self, loop: EventLoopThread | None, thread_name: str) -> None:
        self._loop = loop or EventLoopThread(thread_name)
        self._owns_loop = loop is None
        self._closed = False

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """`coroutine` run on the client's loop; a lost connection dropped and raised as
        `BrokerUnavailable`."""
        try:
            return self._loop.run(coroutine, timeout=self.timeout * 2)
        except MessagingError:
            raise  # ours already: a refusal, or an outage said once
        except Exception as error:
            if not isinstance(error, (TimeoutError, *self.connection_errors)):
                raise
            self._loop.run(self._drop(), timeout=self.timeout)
            raise BrokerUnavailable(self.broker, described(error)) from error

    @abc.abstractmethod
    async def _drop(self) -> None:
        """Close the connection, if any, forgetting what hangs on it."""

    def reset(self) -> None:
        """Drop the connection: the next call connects again."""
        self._loop.run(self._drop(), timeout=self.timeout)

    def close(self) -> None:
        """Drop the connection and stop the loop this client owns. Closing again does
        nothing: an inbox closes its source, and so may the code that made it."""
        if self._closed:
            return
        self._closed = True
        try:
            self._loop.run(self._drop(), timeout=self.timeout)
        finally:
            if self._owns_loop:
                self._loop.close()


def described(error: BaseException) -> str:
    """`Type: message`, or the type alone when the error says nothing more."""
    text = str(error) or type(error).__name__
    return f"{type(error).__name__}: {text}" if text != type(error).__name__ else text
