"""The port an inbox takes messages from: a queue or a consumer that redelivers
whatever it was not told was done."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .messages import IncomingMessage


@dataclass(frozen=True)
class Delivery:
    """A message as received, with what the source needs to acknowledge it.

    Example::

        from eventcraft.messaging import Delivery, IncomingMessage

        # What a Source's receive() hands out: each message with the broker's handle for it.
        delivery = Delivery(IncomingMessage("msg-1", b'{"order": 7}'), token=41, generation=2)
        assert delivery.message.json() == {"order": 7}

        # Its ack() acknowledges by the handles of the connection it holds now, and no other:
        connection = 3  # reconnected since: the broker delivers msg-1 again
        assert [d.token for d in [delivery] if d.generation == connection] == []
    """

    message: IncomingMessage
    token: Any
    """The broker client's own handle (a delivery tag, a JetStream message)."""
    generation: int = 0
    """The connection it came on: a handle of an earlier one is never acknowledged."""


class Source(abc.ABC):
    """Hands out messages and takes acknowledgements of those that are stored.

    What is received and not acknowledged comes again: after `reset()`
    (the connection is dropped) or, for JetStream, after its ack wait. Every
    call raises `BrokerUnavailable` when the broker cannot be reached.

    `RabbitMQSource` and `JetStreamSource` are two; a queue of another kind gets one of
    your own.

    Example::

        from pathlib import Path

        from eventcraft.eventstore import EventStore
        from eventcraft.messaging import Delivery, Inbox, IncomingMessage, Mapped, Source

        class DropFolder(Source):  # files a partner drops in a folder; a stored one is deleted
            broker = "folder drop/"

            def receive(self, limit, timeout):
                files = sorted(Path("drop").glob("*.json"))[:limit]
                return [Delivery(IncomingMessage(f.stem, f.read_bytes()), token=f) for f in files]

            def ack(self, deliveries):
                for delivery in deliveries:
                    delivery.token.unlink()

            def reset(self):
                pass

            def close(self):
                pass

        def received(message: IncomingMessage) -> Mapped:
            return Mapped(f"order-{message.json()['order']}", "OrderReceived", message.json())

        Path("drop").mkdir()
        Path("drop/order-7.json").write_text('{"order": 7}')
        store = EventStore.open("sqlite:///shop.db")
        with Inbox("drop-in", store, received, DropFolder()) as inbox:
            assert inbox.step() == 1  # received, stored, then acknowledged
        assert not any(Path("drop").iterdir()) and store.high_water_mark() == 1
    """

    broker: str

    @abc.abstractmethod
    def receive(self, limit: int, timeout: float) -> list[Delivery]:
        """Up to `limit` messages, waiting at most `timeout` for the first."""

    @abc.abstractmethod
    def ack(self, deliveries: Sequence[Delivery]) -> None:
        """Tell the broker these are done: it never delivers them again."""

    @abc.abstractmethod
    def reset(self) -> None:
        """Drop the connection: everything unacknowledged will be delivered again."""

    @abc.abstractmethod
    def close(self) -> None: ...
