"""Relays in OpenTelemetry: messages published, outages, and the paused and lag gauges."""

from __future__ import annotations

import uuid

import aio_pika
from eventcraft.eventstore import EventStore, NewEvent
from eventcraft.messaging import RabbitMQPublisher, Relay

from tests.messaging.brokers import RABBITMQ_URL, check_rabbitmq, event_loop, wait_for
from tests.ports import free_port

from .conftest import Telemetry


def test_a_relay_counts_what_it_published_and_its_outages_and_gauges_its_pause(
    telemetry: Telemetry, sqlite_url: str
) -> None:
    with event_loop() as loop:
        check_rabbitmq(loop)
    nowhere = f"amqp://guest:guest@127.0.0.1:{free_port()}/"  # nothing listens there
    exchange = f"ec-telemetry-{uuid.uuid4().hex[:8]}"
    with EventStore.open(sqlite_url) as store:
        store.append("order-1", [NewEvent("OrderPlaced", {"n": n}) for n in range(5)])
        with (
            Relay("out", store, RabbitMQPublisher(RABBITMQ_URL, exchange=exchange)) as relay,
            Relay("stuck", store, RabbitMQPublisher(nowhere, timeout=1)) as stuck,
        ):
            relay.catch_up()
            stuck.start()
            wait_for(lambda: stuck.status().state == "paused", 20, "the relay to pause")
            assert telemetry.total("eventcraft.relay.published", **{"eventcraft.relay": "out"}) == 5
            assert telemetry.total("eventcraft.relay.outages", **{"eventcraft.relay": "stuck"}) == 1
            paused = {
                p.attributes["eventcraft.relay"]: p.value
                for p in telemetry.points("eventcraft.relay.paused")
            }
            lag = {
                p.attributes["eventcraft.relay"]: p.value
                for p in telemetry.points("eventcraft.relay.lag")
            }
    assert paused == {"out": 0, "stuck": 1}
    assert lag == {"out": 0, "stuck": 5}
    with event_loop() as loop:
        loop.run(_delete_exchange(exchange), 20)


async def _delete_exchange(name: str) -> None:
    connection = await aio_pika.connect(RABBITMQ_URL, timeout=10)
    channel = await connection.channel()
    await channel.exchange_delete(name)
    await connection.close()
