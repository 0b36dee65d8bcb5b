"""RabbitMQ through aio-pika: the relay's publisher and an inbox's queue.

Publishing uses publisher confirms on one channel: a batch is written at
once and its confirms awaited together, so a batch costs about one round
trip, and one channel keeps the messages in the order they were written.
Messages are persistent, on a durable topic exchange.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue as queue_module
from collections.abc import Sequence
from typing import Any

import aio_pika
import aiormq

from .broker_client import BrokerClient
from .errors import MessageRefused
from .loop import EventLoopThread
from .messages import IncomingMessage, OutgoingMessage
from .publisher import Publisher, shown
from .source import Delivery, Source

DEFAULT_URL = "amqp://guest:guest@127.0.0.1:5672/"
# What a lost connection looks like from aio-pika: its own errors, the socket's
# and a channel that closed under it.
CONNECTION_ERRORS = (
    aiormq.exceptions.AMQPConnectionError,
    aiormq.exceptions.ChannelInvalidStateError,
    aiormq.exceptions.AMQPChannelError,
    ConnectionError,
    OSError,
    asyncio.TimeoutError,
    RuntimeError,
)


class RabbitMQPublisher(BrokerClient, Publisher):
    """Publishes to `exchange` (a durable topic exchange, declared if missing).

    Each message's routing key is `{category}.{type}`. RabbitMQ drops what no queue is
    bound to: bind the consumers' queues before relaying.

    Example::

        # needs: broker
        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.messaging import RabbitMQPublisher, Relay

        store = EventStore.open("sqlite:///shop.db")
        store.append("payment-9", [NewEvent("PaymentCaptured", {"cents": 1600})])
        amqp = "amqp://guest:guest@127.0.0.1:5672/"
        publisher = RabbitMQPublisher(amqp, exchange="payments")  # key: payment.PaymentCaptured
        with Relay("payments-out", store, publisher) as relay:
            relay.catch_up()  # returns once RabbitMQ confirmed every message
            status = relay.status()
        assert (status.position, status.published, status.lag_events) == (1, 1, 0)
        assert status.broker == "RabbitMQ amqp://guest:***@127.0.0.1:5672/ exchange 'payments'"
    """

    connection_errors = CONNECTION_ERRORS

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        exchange: str = "eventcraft",
        timeout: float = 10.0,
        loop: EventLoopThread | None = None,
    ) -> None:
        super().__init__(loop, "eventcraft-rabbitmq")
        self.url = url
        self.exchange_name = exchange
        self.timeout = timeout
        self.broker = f"RabbitMQ {shown(url)} exchange {exchange!r}"
        self._connection: Any = None
        self._exchange: Any = None

    def publish(self, messages: Sequence[OutgoingMessage]) -> None:
        if messages:
            self._call(self._publish(messages))

    async def _publish(self, messages: Sequence[OutgoingMessage]) -> None:
        exchange = await self._ready()
        sent = [
            exchange.publish(
                aio_pika.Message(
                    m.body,
                    content_type="application/json",
                    delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
                    message_id=m.message_id,
                    correlation_id=m.correlation_id,
                    type=m.headers.get("eventcraft-type"),
                    headers=dict(m.headers),
                ),
                routing_key=m.subject,
                mandatory=False,
                timeout=self.timeout,
            )
            for m in messages
        ]
        results = await asyncio.gather(*sent, return_exceptions=True)
        for message, result in zip(messages, results, strict=True):
            if isinstance(result, aiormq.exceptions.DeliveryError):
                raise MessageRefused(self.broker, message.message_id, repr(result.frame))
            if isinstance(result, BaseException):
                raise result

    async def _ready(self) -> Any:
        if self._exchange is not None and not self._connection.is_closed:
            return self._exchange
        await self._drop()
        self._connection = await aio_pika.connect(self.url, timeout=self.timeout)
        channel = await self._connection.channel(publisher_confirms=True)
        self._exchange = await channel.declare_exchange(
            self.exchange_name, aio_pika.ExchangeType.TOPIC, durable=True, timeout=self.timeout
        )
        return self._exchange

    async def _drop(self) -> None:
        connection, self._connection, self._exchange = self._connection, None, None
        if connection is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(connection.close(), self.timeout)


class RabbitMQSource(BrokerClient, Source):
    """An inbox's messages from a durable RabbitMQ queue, with manual acknowledgements.

    The queue is declared (durable) if missing, and bound to each
    `(exchange, routing pattern)` of `bindings` (the exchanges declared as
    durable topic exchanges, as a relay's are). Up to `prefetch` messages are
    in flight unacknowledged; those are delivered again if the connection
    drops before they are acknowledged.

    Example::

        # needs: broker
        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.messaging import (
            Inbox, IncomingMessage, Mapped, RabbitMQPublisher, RabbitMQSource, Relay,
        )

        orders = EventStore.open("sqlite:///orders.db")
        warehouse = EventStore.open("sqlite:///warehouse.db")
        amqp = "amqp://guest:guest@127.0.0.1:5672/"
        queue = RabbitMQSource(amqp, queue="warehouse-picking", bindings=[("sales", "order.#")])

        def to_pick(message: IncomingMessage) -> Mapped:
            return Mapped(f"pick-{message.json()['order']}", "PickRequested", message.json())

        with (
            Inbox("sales-in", warehouse, to_pick, queue) as inbox,
            Relay("sales-out", orders, RabbitMQPublisher(amqp, exchange="sales")) as relay,
        ):
            inbox.step(timeout=0.1)  # connects: the queue is declared and bound
            orders.append("order-42", [NewEvent("OrderPlaced", {"order": 42})])
            relay.catch_up()
            placed = next(orders.read_all())
            while inbox.stored_event(str(placed.id)) is None:  # message id: the event id
                inbox.step()
        assert [e.type for e in warehouse.read_stream("pick-42")] == ["PickRequested"]
    """

    connection_errors = CONNECTION_ERRORS

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        queue: str,
        bindings: Sequence[tuple[str, str]] = (),
        prefetch: int = 500,
        timeout: float = 10.0,
        loop: EventLoopThread | None = None,
    ) -> None:
        super().__init__(loop, "eventcraft-rabbitmq-in")
        self.url = url
        self.queue_name = queue
        self.bindings = tuple(bindings)
        self.prefetch = prefetch
        self.timeout = timeout
        self.broker = f"RabbitMQ {shown(url)} queue {queue!r}"
        self._connection: Any = None
        self._channel: Any = None
        self._generation = 0
        self._arrived: queue_module.Queue[Delivery] = queue_module.Queue()

    def receive(self, limit: int, timeout: float) -> list[Delivery]:
        self._call(self._ready())
        got: list[Delivery] = []
        try:
            got.append(self._arrived.get(timeout=timeout))
            while len(got) < limit:
                got.append(self._arrived.get_nowait())
        except queue_module.Empty:
            pass
        return [d for d in got if d.generation == self._generation]

    def ack(self, deliveries: Sequence[Delivery]) -> None:
        current = [d for d in deliveries if d.generation == self._generation]
        if current:
            # One acknowledgement covers every earlier delivery of the channel.
            self._call(current[-1].token.ack(multiple=True))

    async def _ready(self) -> None:
        if self._channel is not None and not self._connection.is_closed:
            return
        await self._drop()
        self._connection = await aio_pika.connect(self.url, timeout=self.timeout)
        self._channel = await self._connection.channel()
        await self._channel.set_qos(prefetch_count=self.prefetch)
        declared = await self._channel.declare_queue(
            self.queue_name, durable=True, timeout=self.timeout
        )
        for exchange, pattern in self.bindings:
            source = await self._channel.declare_exchange(
                exchange, aio_pika.ExchangeType.TOPIC, durable=True, timeout=self.timeout
            )
            await declared.bind(source, pattern, timeout=self.timeout)
        generation = self._generation

        async def arrived(message: Any) -> None:
            headers = {str(k): _text(v) for k, v in (message.headers or {}).items()}
            incoming = IncomingMessage(
                message_id=message.message_id or "",
                body=message.body,
                headers=headers,
                subject=message.routing_key or "",
            )
            self._arrived.put(Delivery(incoming, message, generation))

        await declared.consume(arrived)

    async def _drop(self) -> None:
        # Deliveries of the old channel can no longer be acknowledged: forget them.
        self._generation += 1
        while not self._arrived.empty():
            self._arrived.get_nowait()
        connection, self._connection, self._channel = self._connection, None, None
        if connection is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(connection.close(), self.timeout)


def _text(value: object) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)
