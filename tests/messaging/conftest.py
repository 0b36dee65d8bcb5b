"""Fixtures of the messaging tests: a broker target per test on the real servers."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from eventcraft.messaging import JetStreamPublisher, Publisher, RabbitMQPublisher
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
)


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

    def publisher(self, url: str | None = None) -> Publisher:
        return make_publisher(self.kind, url or self.url, self.name)


def make_publisher(kind: str, url: str, name: str) -> Publisher:
    if kind == "rabbitmq":
        return RabbitMQPublisher(url, exchange=name, timeout=3)
    return JetStreamPublisher(url, prefix=name, timeout=3)


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
    )
    reader.close()


@pytest.fixture(params=["rabbitmq", "nats"])
def target(request: pytest.FixtureRequest) -> Target:
    name = "rabbitmq" if request.param == "rabbitmq" else "jetstream"
    found: Target = request.getfixturevalue(name)
    return found
