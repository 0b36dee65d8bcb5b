"""Queues an inbox takes messages from, filled by the tests as a producer would."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import aio_pika
import nats.js.errors
from eventcraft.messaging import Source
from eventcraft.messaging.jetstream import connect
from eventcraft.messaging.loop import EventLoopThread

from .workers import make_source


@dataclass
class Producer:
    kind: str
    spec: str
    loop: EventLoopThread

    def send(self, messages: Sequence[tuple[str, bytes]]) -> None:
        """Publish (message id, body) pairs, in order, confirmed by the broker."""
        kind, url, name = self.spec.split("|")
        if kind == "rabbitmq":

            async def publish() -> None:
                connection = await aio_pika.connect(url, timeout=10)
                channel = await connection.channel(publisher_confirms=True)
                await channel.declare_queue(name, durable=True)
                for message_id, body in messages:
                    await channel.default_exchange.publish(
                        aio_pika.Message(body, message_id=message_id), routing_key=name
                    )
                await connection.close()

        else:
            subject = name.split(":")[1]

            async def publish() -> None:
                nc = await connect(url, 10)
                js = nc.jetstream()
                for message_id, body in messages:
                    await js.publish(subject, body, headers={"Message-Id": message_id})
                await nc.close()

        self.loop.run(publish(), 60)

    def pending(self) -> int:
        """Messages waiting: in RabbitMQ those ready to deliver (not those a consumer
        holds unacknowledged), in JetStream those not yet acknowledged."""
        kind, url, name = self.spec.split("|")
        if kind == "rabbitmq":

            async def count() -> int:
                connection = await aio_pika.connect(url, timeout=10)
                channel = await connection.channel()
                queue = await channel.declare_queue(name, durable=True, passive=True)
                await connection.close()
                return int(queue.declaration_result.message_count or 0)

        else:
            stream, _ = name.split(":")

            async def count() -> int:
                nc = await connect(url, 10)
                try:
                    info = await nc.jetstream().consumer_info(stream, "inbox")
                    return int(info.num_pending + info.num_ack_pending)
                except nats.js.errors.NotFoundError:
                    # No consumer yet: every message of the stream is pending.
                    state = (await nc.jetstream().stream_info(stream)).state
                    return int(state.messages)
                finally:
                    await nc.close()

        return int(self.loop.run(count(), 20))

    def source(self, ack_wait: float = 2.0) -> Source:
        return make_source(self.spec, ack_wait)
