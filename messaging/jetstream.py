"""NATS JetStream through nats-py: the relay's publisher and an inbox's consumer.

Each message goes to `{prefix}.{category}.{type}` with the header
`Nats-Msg-Id` set to the event id: the server drops a message whose id it
has seen within the stream's duplicate window (two minutes by default), so a
relay that publishes a batch again after a crash stores nothing twice there.
A batch's publishes are sent at once and their acknowledgements awaited
together.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

import nats
import nats.errors
import nats.js.errors

from .errors import BrokerUnavailable, MessageRefused, MessagingConfigError
from .loop import EventLoopThread
from .messages import OutgoingMessage
from .publisher import Publisher, shown

DEFAULT_URL = "nats://127.0.0.1:4222"
CONNECTION_ERRORS = (
    nats.errors.Error,
    ConnectionError,
    OSError,
    asyncio.TimeoutError,
)


async def _quiet(error: Exception) -> None:
    # nats-py prints errors to its logger by default; ours surface as BrokerUnavailable.
    del error


async def connect(url: str, timeout: float) -> Any:
    """A connection that does not reconnect behind our back: the caller does."""
    return await nats.connect(
        servers=[url],
        connect_timeout=timeout,
        allow_reconnect=False,
        max_reconnect_attempts=0,
        error_cb=_quiet,
    )


class JetStreamPublisher(Publisher):
    """Publishes to subjects under `prefix` in JetStream.

    With `stream` named, that stream is created on first use if missing,
    taking `{prefix}.>`; otherwise a stream must already take the subjects.

    ::

        publisher = JetStreamPublisher("nats://127.0.0.1:4222", prefix="orders", stream="ORDERS")
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        prefix: str = "eventcraft",
        stream: str | None = None,
        timeout: float = 10.0,
        loop: EventLoopThread | None = None,
    ) -> None:
        if not prefix or any(c in prefix for c in " \t*>"):
            raise MessagingConfigError(f"a subject prefix has no spaces, * or >: {prefix!r}")
        self.url = url
        self.prefix = prefix
        self.stream = stream
        self.timeout = timeout
        self.broker = f"NATS {shown(url)} subjects {prefix}.>"
        self._loop = loop or EventLoopThread("eventcraft-nats")
        self._owns_loop = loop is None
        self._nc: Any = None
        self._js: Any = None

    def publish(self, messages: Sequence[OutgoingMessage]) -> None:
        if not messages:
            return
        try:
            self._loop.run(self._publish(messages), timeout=self.timeout * 2)
        except MessageRefused:
            raise
        except (TimeoutError, *CONNECTION_ERRORS) as error:
            self._loop.run(self._drop(), timeout=self.timeout)
            raise BrokerUnavailable(self.broker, f"{type(error).__name__}: {error}") from error

    async def _publish(self, messages: Sequence[OutgoingMessage]) -> None:
        js = await self._ready()
        sent = [
            js.publish(
                f"{self.prefix}.{m.subject}",
                m.body,
                timeout=self.timeout,
                headers={"Nats-Msg-Id": m.message_id, **_headers(m)},
            )
            for m in messages
        ]
        results = await asyncio.gather(*sent, return_exceptions=True)
        for message, result in zip(messages, results, strict=True):
            if isinstance(result, nats.js.errors.APIError) and not isinstance(
                result, nats.js.errors.ServiceUnavailableError
            ):
                raise MessageRefused(self.broker, message.message_id, str(result))
            if isinstance(result, BaseException):
                raise result

    async def _ready(self) -> Any:
        if self._js is not None and self._nc.is_connected:
            return self._js
        await self._drop()
        self._nc = await connect(self.url, self.timeout)
        self._js = self._nc.jetstream(timeout=self.timeout)
        if self.stream is not None:
            try:
                await self._js.stream_info(self.stream)
            except nats.js.errors.NotFoundError:
                await self._js.add_stream(name=self.stream, subjects=[f"{self.prefix}.>"])
        return self._js

    async def _drop(self) -> None:
        nc, self._nc, self._js = self._nc, None, None
        if nc is not None and not nc.is_closed:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(nc.close(), self.timeout)

    def close(self) -> None:
        try:
            self._loop.run(self._drop(), timeout=self.timeout)
        finally:
            if self._owns_loop:
                self._loop.close()


def _headers(message: OutgoingMessage) -> dict[str, str]:
    headers = dict(message.headers)
    if message.correlation_id is not None:
        headers["eventcraft-correlation-id"] = message.correlation_id
    return headers
