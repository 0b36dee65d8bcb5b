"""The port a relay publishes through: one call per batch, back when all is confirmed."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from urllib.parse import urlsplit, urlunsplit

from .messages import OutgoingMessage


class Publisher(abc.ABC):
    """Publishes batches of messages to a broker, confirmed before `publish` returns.

    `publish` raises `BrokerUnavailable` when the broker cannot be reached or
    the connection breaks before every message is confirmed (the next call
    connects again), and `MessageRefused` when the broker refuses one. Either
    way some of the batch may have arrived: the relay publishes it all again,
    which is why every message carries its event id.

    `RabbitMQPublisher` and `JetStreamPublisher` are two; a broker of another kind gets
    one of your own.

    Example::

        import json

        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.messaging import Publisher, Relay

        class NdjsonFile(Publisher):  # a file a batch job picks up: one JSON line a message
            broker = "file outbox.ndjson"

            def publish(self, messages):
                with open("outbox.ndjson", "a") as outbox:
                    for m in messages:
                        print(json.dumps({"id": m.message_id, "subject": m.subject}), file=outbox)

            def close(self):
                pass

        store = EventStore.open("sqlite:///shop.db")
        store.append("order-7", [NewEvent("OrderPlaced", {"cents": 1600})])
        with Relay("orders-out", store, NdjsonFile()) as relay:
            relay.catch_up()
        with open("outbox.ndjson") as outbox:
            assert [json.loads(line)["subject"] for line in outbox] == ["order.OrderPlaced"]
    """

    broker: str
    """The broker as shown in errors and status: kind and address, no password."""

    @abc.abstractmethod
    def publish(self, messages: Sequence[OutgoingMessage]) -> None: ...

    @abc.abstractmethod
    def close(self) -> None: ...


def shown(url: str) -> str:
    """`url` without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))
