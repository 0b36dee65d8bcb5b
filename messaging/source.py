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
    """A message as received, with what the source needs to acknowledge it."""

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
