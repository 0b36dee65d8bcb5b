"""Fixtures of the messaging tests: a broker target per test on the real servers."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import aio_pika
import pytest
from eventcraft.eventstore import EventStore
from eventcraft.messaging import Inbox, IncomingMessage, Publisher
from eventcraft.messaging.jetstream import connect
from eventcraft.messaging.loop import EventLoopThread

from .brokers import (
    NATS_URL,
    RABBITMQ_URL,
    JetStreamReader,
    RabbitQueue,
    Received,
    check_nats,
    check_rabbitmq,
    event_loop,
    make_publisher,
)
from .queues import Producer
from .workers import order_received


@pytest.fixture
def loop() -> Iterator[EventLoopThread]:
    with event_loop() as running:
        yield running


@dataclass
class Target:
    """Where a relay publishes in one test, and what arrived there."""

    kind: str
    url: str
    name: str
    """The exchange (RabbitMQ) or subject prefix (NATS)."""
    read: Callable[[Callable[[list[Received]], bool], float], list[Received]]
    spec: str
    """How a worker process makes the same publisher: `kind|url|name`."""
    stream: str = ""
    """The JetStream stream that holds what is published (NATS only)."""

    def publisher(self, url: str | None = None) -> Publisher:
        return make_publisher(self.kind, url or self.url, self.name)


@pytest.fixture
def rabbitmq(loop: EventLoopThread) -> Iterator[Target]:
    check_rabbitmq(loop)
    exchange = f"ec-test-{uuid.uuid4().hex[:10]}"
    queue = RabbitQueue(loop, exchange)
    yield Target(
        "rabbitmq",
        RABBITMQ_URL,
        exchange,
        lambda until, timeout: queue.drain(until, timeout),
        f"rabbitmq|{RABBITMQ_URL}|{exchange}",
    )
    queue.close()


@pytest.fixture
def jetstream(loop: EventLoopThread) -> Iterator[Target]:
    check_nats(loop)
    tag = uuid.uuid4().hex[:10]
    reader = JetStreamReader(loop, f"ECTEST{tag}", f"ectest{tag}")
    yield Target(
        "nats",
        NATS_URL,
        reader.prefix,
        lambda until, timeout: reader.read(until, timeout),
        f"nats|{NATS_URL}|{reader.prefix}",
        reader.stream,
    )
    reader.close()


@pytest.fixture(params=["rabbitmq", "nats"])
def target(request: pytest.FixtureRequest) -> Target:
    name = "rabbitmq" if request.param == "rabbitmq" else "jetstream"
    found: Target = request.getfixturevalue(name)
    return found


@pytest.fixture(params=["rabbitmq", "nats"])
def producer(request: pytest.FixtureRequest, loop: EventLoopThread) -> Iterator[Producer]:
    tag = uuid.uuid4().hex[:10]
    if request.param == "rabbitmq":
        check_rabbitmq(loop)
        spec = f"rabbitmq|{RABBITMQ_URL}|ec-inbox-{tag}"

        async def setup() -> None:
            connection = await aio_pika.connect(RABBITMQ_URL, timeout=10)
            channel = await connection.channel()
            await channel.declare_queue(f"ec-inbox-{tag}", durable=True)
            await connection.close()

        async def teardown() -> None:
            connection = await aio_pika.connect(RABBITMQ_URL, timeout=10)
            channel = await connection.channel()
            await channel.queue_delete(f"ec-inbox-{tag}")
            await connection.close()

    else:
        check_nats(loop)
        stream = f"ECINBOX{tag}"
        spec = f"nats|{NATS_URL}|{stream}:ecinbox{tag}.orders"

        async def setup() -> None:
            nc = await connect(NATS_URL, 10)
            # The producer's id travels in a header JetStream does not de-duplicate by:
            # its resends reach the inbox, which must store them once itself.
            await nc.jetstream().add_stream(name=stream, subjects=[f"ecinbox{tag}.>"])
            await nc.close()

        async def teardown() -> None:
            nc = await connect(NATS_URL, 10)
            await nc.jetstream().delete_stream(stream)
            await nc.close()

    loop.run(setup(), 20)
    yield Producer(request.param, spec, loop)
    loop.run(teardown(), 20)


@pytest.fixture
def with_failures(shared_store_url: str) -> str:
    """Two messages the inbox `orders-in` could not store: bad-1 and odd-1."""
    with (
        EventStore.open(shared_store_url) as store,
        Inbox("orders-in", store, order_received) as inbox,
    ):
        inbox.take(IncomingMessage("good-1", b'{"order": 1}', subject="orders"))
        inbox.take(IncomingMessage("bad-1", b"not json", {"x-source": "shop"}, "orders"))
        inbox.take(IncomingMessage("odd-1", b"{}", subject="orders"))
    return shared_store_url
