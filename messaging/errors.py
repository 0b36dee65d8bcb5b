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
    """Base of every error the messaging package raises.

    Example::

        from eventcraft.eventstore import EventStore
        from eventcraft.messaging import InboxErrorStore, MessagingError
        from eventcraft.projections import Database

        errors = InboxErrorStore(Database.of(None, EventStore.open("sqlite:///shop.db")))
        try:
            errors.resend("orders-in", "msg-404")
        except MessagingError as error:  # any of the package's errors
            told = f"{type(error).__name__}: {error}"
        assert told.startswith("FailedMessageNotFound: inbox 'orders-in' has no failed message")
    """


class BrokerUnavailable(MessagingError, ConnectionError):
    """A broker could not be reached, or the connection broke before it confirmed.

    What was not confirmed is published again once the broker is back.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.messaging import BrokerUnavailable, RabbitMQPublisher, Relay

        store = EventStore.open("sqlite:///shop.db")
        store.append("order-7", [NewEvent("OrderPlaced", {"cents": 1600})])
        down = RabbitMQPublisher("amqp://guest:guest@127.0.0.1:1/", exchange="shop-orders")
        with Relay("orders-out", store, down) as relay:  # nothing listens on port 1
            try:
                relay.catch_up()
            except BrokerUnavailable as error:
                told = str(error)
            assert relay.status().position == 0  # nothing confirmed: the checkpoint stays
        assert told.startswith("RabbitMQ amqp://guest:***@127.0.0.1:1/ exchange 'shop-orders'")
    """

    def __init__(self, broker: str, detail: str) -> None:
        self.broker = broker
        self.detail = detail
        super().__init__(f"{broker} is unavailable: {detail}")

    def __reduce__(self) -> tuple[type[BrokerUnavailable], tuple[str, str]]:
        return (type(self), (self.broker, self.detail))


class MessageRefused(MessagingError):
    """The broker answered a publish with a negative acknowledgement.

    A relay parks the refused event in the projections' error store and goes on past it.
    A `Publisher` of your own raises it for a message its broker refuses for good.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.messaging import MessageRefused, Publisher, Relay

        class Webhook(Publisher):  # a partner's endpoint, which takes 1 kB at most
            broker = "webhook https://partner.example/orders"

            def publish(self, messages):
                for message in messages:
                    if len(message.body) > 1024:  # the endpoint would answer 413
                        raise MessageRefused(self.broker, message.message_id, "413 too large")

            def close(self):
                pass

        store = EventStore.open("sqlite:///shop.db")
        store.append("order-7", [NewEvent("OrderPlaced", {"note": "x" * 2000})])
        store.append("order-8", [NewEvent("OrderPlaced", {"note": "gift"})])
        with Relay("orders-out", store, Webhook()) as relay:
            relay.catch_up()  # order-7's event parked, order-8's published
            status = relay.status()
        assert (status.position, status.parked) == (2, 1)
    """

    def __init__(self, broker: str, message_id: str, detail: str) -> None:
        self.broker = broker
        self.message_id = message_id
        self.detail = detail
        super().__init__(f"{broker} refused message {message_id}: {detail}")

    def __reduce__(self) -> tuple[type[MessageRefused], tuple[str, str, str]]:
        return (type(self), (self.broker, self.message_id, self.detail))


class InvalidMessage(MessagingError, ValueError):
    """An incoming message that cannot become an event: no id, a body that is not
    JSON, or what the user's mapping made of it is refused.

    A mapping raises it to refuse a message: an inbox keeps the message in its error
    store, and the HTTP intake answers 422 with its words.

    Example::

        from eventcraft.messaging import IncomingMessage, InvalidMessage

        try:
            IncomingMessage("msg-1", b"<order id='7'/>").json()
        except InvalidMessage as error:
            told = str(error)
        assert told.startswith("message 'msg-1': the body is not JSON")
    """


class MessageIdConflict(MessagingError, ValueError):
    """A message id an inbox stored already, sent again with another body: no retry.

    `Inbox.append` raises it; `Inbox.take` keeps the message in the error store with it
    (acknowledged, for an operator to see and discard); the HTTP intake answers 409.
    The stored event is left as it is, whichever stream the mapping names.

    Example::

        from eventcraft.eventstore import EventStore
        from eventcraft.messaging import Inbox, IncomingMessage, Mapped, MessageIdConflict

        store = EventStore.open("sqlite:///shop.db")
        placed = IncomingMessage("order-7-placed", b'{"cents": 1600}')
        changed = IncomingMessage("order-7-placed", b'{"cents": 1700}')  # the same id
        with Inbox("orders-in", store, lambda m: Mapped("order-7", "Placed", m.json())) as inbox:
            inbox.take(placed)
            try:
                inbox.append(changed)  # raises what went wrong
            except MessageIdConflict as error:
                assert error.message_id == "order-7-placed"
                assert str(error).startswith(
                    "message id 'order-7-placed' is already used: it is stored with another body"
                )
            assert inbox.take(changed) is None  # kept in the error store instead
            [failed] = inbox.failures()
        assert failed.error.startswith("MessageIdConflict: message id 'order-7-placed'")
        assert failed.body == b'{"cents": 1700}'
        assert [e.data for e in store.read_stream("order-7")] == [{"cents": 1600}]
    """

    def __init__(self, message_id: str, detail: str) -> None:
        self.message_id = message_id
        self.detail = detail
        super().__init__(f"message id {message_id!r} is already used: {detail}")

    def __reduce__(self) -> tuple[type[MessageIdConflict], tuple[str, str]]:
        return (type(self), (self.message_id, self.detail))


class FailedMessageNotFound(MessagingError, LookupError):
    """An inbox's error store holds no message with that id.

    Example::

        from eventcraft.eventstore import EventStore
        from eventcraft.messaging import FailedMessageNotFound, Inbox, Mapped

        store = EventStore.open("sqlite:///shop.db")
        with Inbox("orders-in", store, lambda m: Mapped("order-7", "Received", m.json())) as inbox:
            try:
                inbox.retry_failed("msg-404")
            except FailedMessageNotFound as error:
                told = str(error)
        assert told == "inbox 'orders-in' has no failed message with id 'msg-404'"
    """


class MessageDiscarded(MessagingError):
    """A failed message an operator discarded: it is kept, and is not resent or discarded
    again.

    Example::

        from eventcraft.eventstore import EventStore
        from eventcraft.messaging import (
            Inbox, InboxErrorStore, IncomingMessage, Mapped, MessageDiscarded,
        )
        from eventcraft.projections import Database

        store = EventStore.open("sqlite:///shop.db")
        with Inbox("orders-in", store, lambda m: Mapped("order-7", "Received", m.json())) as inbox:
            inbox.take(IncomingMessage("msg-1", b"not json"))  # kept in the error store
        errors = InboxErrorStore(Database.of(None, store))
        errors.discard("orders-in", "msg-1", reason="a test message")
        try:
            errors.resend("orders-in", "msg-1")
        except MessageDiscarded as error:
            refused = error
        assert (refused.message_id, refused.reason) == ("msg-1", "a test message")
    """

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
    `Bearer realm="orders"`) in `WWW-Authenticate` when given.

    Example::

        from eventcraft.eventstore import EventStore
        from eventcraft.messaging import HttpIntake, Inbox, Mapped, Unauthenticated
        from starlette.testclient import TestClient

        def bearer_token(request) -> None:
            if not request.headers.get("authorization", "").startswith("Bearer "):
                raise Unauthenticated("send a bearer token", challenge='Bearer realm="orders"')

        store = EventStore.open("sqlite:///intake.db")
        inbox = Inbox("orders-http", store, lambda m: Mapped("order-7", "Received", m.json()))
        client = TestClient(HttpIntake(inbox, authenticate=bearer_token))
        answer = client.post("/orders", json={"order": 7}, headers={"Idempotency-Key": "order-7"})
        assert answer.status_code == 401 and answer.json() == {"error": "send a bearer token"}
        assert answer.headers["www-authenticate"] == 'Bearer realm="orders"'
    """

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
    send this. The client gets 403 with `detail`.

    Example::

        from eventcraft.eventstore import EventStore
        from eventcraft.messaging import Forbidden, HttpIntake, Inbox, Mapped
        from starlette.testclient import TestClient

        SUSPENDED = {"shop-2"}

        def not_suspended(request) -> None:
            shop = request.headers.get("x-shop", "")  # as a checked token would name it
            if shop in SUSPENDED:
                raise Forbidden(f"{shop} is suspended and may not send orders")

        store = EventStore.open("sqlite:///intake.db")
        inbox = Inbox("orders-http", store, lambda m: Mapped("order-7", "Received", m.json()))
        client = TestClient(HttpIntake(inbox, authenticate=not_suspended))
        headers = {"Idempotency-Key": "order-7", "X-Shop": "shop-2"}
        answer = client.post("/orders", json={"order": 7}, headers=headers)
        assert answer.status_code == 403
        assert answer.json() == {"error": "shop-2 is suspended and may not send orders"}
    """

    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(detail)


class MessagingConfigError(MessagingError, ValueError):
    """A relay, inbox or intake endpoint given arguments it cannot work with.

    Example::

        from eventcraft.eventstore import EventStore
        from eventcraft.messaging import Inbox, Mapped, MessagingConfigError

        store = EventStore.open("sqlite:///shop.db")
        inbox = Inbox("orders-in", store, lambda m: Mapped("order-7", "Received", m.json()))
        try:
            inbox.step()  # an inbox made without a source takes only what `take` is handed
        except MessagingConfigError as error:
            told = str(error)
        assert told == "inbox 'orders-in' has no source to take messages from"
    """
