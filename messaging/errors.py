"""The messaging package's exceptions.

::

    MessagingError
    ├── BrokerUnavailable (ConnectionError)   a broker could not be reached or dropped us
    ├── MessageRefused                        a broker answered a publish with a refusal
    ├── InvalidMessage (ValueError)           an incoming message the inbox cannot store
    ├── MessageIdConflict (ValueError)        a used message id sent with another body
    ├── FailedMessageNotFound (LookupError)   no such message in an inbox's error store
    ├── MessageDiscarded                      a failed message settled already: discarded
    ├── Unauthenticated (PermissionError)     an intake's hook: who sent it is not known (401)
    ├── Forbidden (PermissionError)           an intake's hook: the sender may not send it (403)
    └── MessagingConfigError (ValueError)     a relay, inbox or intake set up wrongly

The brokers' client errors (aio-pika's, nats-py's) are translated into these
where the clients are called (`rabbitmq.py`, `jetstream.py`); they never
reach a caller.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


class MessagingError(Exception):
    """Base of every error the messaging package raises."""


class BrokerUnavailable(MessagingError, ConnectionError):
    """A broker could not be reached, or the connection broke before it confirmed.

    What was not confirmed is published again once the broker is back.
    """

    def __init__(self, broker: str, detail: str) -> None:
        self.broker = broker
        self.detail = detail
        super().__init__(f"{broker} is unavailable: {detail}")

    def __reduce__(self) -> tuple[type[BrokerUnavailable], tuple[str, str]]:
        return (type(self), (self.broker, self.detail))


class MessageRefused(MessagingError):
    """The broker answered a publish with a negative acknowledgement."""

    def __init__(self, broker: str, message_id: str, detail: str) -> None:
        self.broker = broker
        self.message_id = message_id
        self.detail = detail
        super().__init__(f"{broker} refused message {message_id}: {detail}")

    def __reduce__(self) -> tuple[type[MessageRefused], tuple[str, str, str]]:
        return (type(self), (self.broker, self.message_id, self.detail))


class InvalidMessage(MessagingError, ValueError):
    """An incoming message that cannot become an event: no id, a body that is not
    JSON, or what the user's mapping made of it is refused."""


class MessageIdConflict(MessagingError, ValueError):
    """A message id already stored, sent again with a different body or stream."""

    def __init__(self, message_id: str, detail: str) -> None:
        self.message_id = message_id
        self.detail = detail
        super().__init__(f"message id {message_id!r} is already used: {detail}")

    def __reduce__(self) -> tuple[type[MessageIdConflict], tuple[str, str]]:
        return (type(self), (self.message_id, self.detail))


class FailedMessageNotFound(MessagingError, LookupError):
    """An inbox's error store holds no message with that id."""


class MessageDiscarded(MessagingError):
    """A failed message an operator discarded: it is kept, and is not resent or discarded
    again."""

    def __init__(
        self, inbox: str, message_id: str, discarded_at: float, reason: str | None
    ) -> None:
        self.inbox = inbox
        self.message_id = message_id
        self.discarded_at = discarded_at
        self.reason = reason
        moment = datetime.fromtimestamp(discarded_at, UTC).strftime("%Y-%m-%d %H:%M:%S")
        said = f" ({reason})" if reason else ""
        super().__init__(
            f"message {message_id!r} of inbox {inbox!r} was discarded at {moment} UTC{said}"
        )

    def __reduce__(
        self,
    ) -> tuple[type[MessageDiscarded], tuple[str, str, float, str | None]]:
        return (type(self), (self.inbox, self.message_id, self.discarded_at, self.reason))


class Unauthenticated(MessagingError, PermissionError):
    """Raised by an HTTP intake's `authenticate` hook: the request does not say who sent
    it, or not credibly. The client gets 401 with `detail`, and `challenge` (such as
    `Bearer realm="orders"`) in `WWW-Authenticate` when given."""

    def __init__(self, detail: str, *, challenge: str | None = None) -> None:
        self.detail = detail
        self.challenge = challenge
        super().__init__(detail)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_unauthenticated, (self.detail, self.challenge))


def _unauthenticated(detail: str, challenge: str | None) -> Unauthenticated:
    return Unauthenticated(detail, challenge=challenge)


class Forbidden(MessagingError, PermissionError):
    """Raised by an HTTP intake's `authenticate` hook: the sender is known and may not
    send this. The client gets 403 with `detail`."""

    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(detail)


class MessagingConfigError(MessagingError, ValueError):
    """A relay, inbox or intake endpoint given arguments it cannot work with."""
