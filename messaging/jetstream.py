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
import nats.js.api
import nats.js.errors

from .broker_client import BrokerClient
from .errors import MessageRefused, MessagingConfigError
from .loop import EventLoopThread
from .messages import IncomingMessage, OutgoingMessage
from .publisher import Publisher, shown
from .source import Delivery, Source

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


class JetStreamPublisher(BrokerClient, Publisher):
    """Publishes to subjects under `prefix` in JetStream.

    With `stream` named, that stream is created on first use if missing,
    taking `{prefix}.>`; otherwise a stream must already take the subjects.

    Example::

        # needs: broker
        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.messaging import JetStreamPublisher, Relay

        store = EventStore.open("sqlite:///shop.db")
        store.append("payment-9", [NewEvent("PaymentCaptured", {"cents": 1600})])
        nats = "nats://127.0.0.1:4222"
        # The stream PAYMENTS, taking payments.>, is made if missing.
        publisher = JetStreamPublisher(nats, prefix="payments", stream="PAYMENTS")
        with Relay("payments-out", store, publisher) as relay:
            relay.catch_up()  # to payments.payment.PaymentCaptured, acknowledged by JetStream
            status = relay.status()
        assert (status.position, status.published, status.lag_events) == (1, 1, 0)
    """

    connection_errors = CONNECTION_ERRORS

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
        super().__init__(loop, "eventcraft-nats")
        self.url = url
        self.prefix = prefix
        self.stream = stream
        self.timeout = timeout
        self.broker = f"NATS {shown(url)} subjects {prefix}.>"
        self._nc: Any = None
        self._js: Any = None

    def publish(self, messages: Sequence[OutgoingMessage]) -> None:
        if messages:
            self._call(self._publish(messages))

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


def _headers(message: OutgoingMessage) -> dict[str, str]:
    headers = dict(message.headers)
    if message.correlation_id is not None:
        headers["eventcraft-correlation-id"] = message.correlation_id
    return headers


class JetStreamSource(BrokerClient, Source):
    """An inbox's messages from a durable JetStream pull consumer.

    The consumer `durable` on `stream` is created if missing (explicit acks,
    `subject` as its filter). A message's id is its `id_header` header
    (`Nats-Msg-Id`, which JetStream de-duplicates by too, unless told
    otherwise); one published without it is known by its stream and sequence
    number, which a redelivery keeps. What is not acknowledged within `ack_wait`
    seconds is delivered again.

    Example::

        # needs: broker
        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.messaging import (
            Inbox, IncomingMessage, JetStreamPublisher, JetStreamSource, Mapped, Relay,
        )

        orders = EventStore.open("sqlite:///orders.db")
        warehouse = EventStore.open("sqlite:///warehouse.db")
        nats = "nats://127.0.0.1:4222"
        orders.append("order-42", [NewEvent("OrderPlaced", {"order": 42})])
        publisher = JetStreamPublisher(nats, prefix="sales", stream="SALES")
        with Relay("sales-out", orders, publisher) as relay:
            relay.catch_up()

        consumer = JetStreamSource(nats, stream="SALES", durable="picking", subject="sales.order.>")

        def to_pick(message: IncomingMessage) -> Mapped:
            return Mapped(f"pick-{message.json()['order']}", "PickRequested", message.json())

        with Inbox("sales-in", warehouse, to_pick, consumer) as inbox:
            placed = next(orders.read_all())
            while inbox.stored_event(str(placed.id)) is None:  # Nats-Msg-Id: the event id
                inbox.step()
        assert [e.type for e in warehouse.read_stream("pick-42")] == ["PickRequested"]
    """

    connection_errors = CONNECTION_ERRORS

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        stream: str,
        durable: str,
        subject: str | None = None,
        id_header: str = "Nats-Msg-Id",
        ack_wait: float = 30.0,
        timeout: float = 10.0,
        loop: EventLoopThread | None = None,
    ) -> None:
        super().__init__(loop, "eventcraft-nats-in")
        self.url = url
        self.stream = stream
        self.durable = durable
        self.subject = subject
        self.id_header = id_header
        self.ack_wait = ack_wait
        self.timeout = timeout
        self.broker = f"NATS {shown(url)} stream {stream!r} consumer {durable!r}"
        self._nc: Any = None
        self._subscription: Any = None
        self._generation = 0

    def receive(self, limit: int, timeout: float) -> list[Delivery]:
        return list(self._call(self._fetch(limit, timeout)))

    async def _fetch(self, limit: int, timeout: float) -> list[Delivery]:
        subscription = await self._ready()
        try:
            messages = await subscription.fetch(limit, timeout=max(timeout, 0.01))
        except nats.errors.TimeoutError:
            return []
        deliveries = []
        for msg in messages:
            headers = dict(msg.headers or {})
            message_id = headers.get(self.id_header) or (
                f"{msg.metadata.stream}:{msg.metadata.sequence.stream}"
            )
            incoming = IncomingMessage(message_id, msg.data or b"", headers, msg.subject)
            deliveries.append(Delivery(incoming, msg, self._generation))
        return deliveries

    def ack(self, deliveries: Sequence[Delivery]) -> None:
        current = [d for d in deliveries if d.generation == self._generation]
        if current:
            self._call(self._ack(current))

    async def _ack(self, deliveries: Sequence[Delivery]) -> None:
        for delivery in deliveries:
            await delivery.token.ack()
        await self._nc.flush(timeout=self.timeout)

    async def _ready(self) -> Any:
        if self._subscription is not None and self._nc.is_connected:
            return self._subscription
        await self._drop()
        self._nc = await connect(self.url, self.timeout)
        js = self._nc.jetstream(timeout=self.timeout)
        config = nats.js.api.ConsumerConfig(
            durable_name=self.durable,
            ack_policy=nats.js.api.AckPolicy.EXPLICIT,
            ack_wait=self.ack_wait,
            filter_subject=self.subject,
        )
        self._subscription = await js.pull_subscribe(
            self.subject or "", durable=self.durable, stream=self.stream, config=config
        )
        return self._subscription

    async def _drop(self) -> None:
        self._generation += 1
        nc, self._nc, self._subscription = self._nc, None, None
        if nc is not None and not nc.is_closed:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(nc.close(), self.timeout)
