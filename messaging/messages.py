"""What crosses to a broker and back: an event as a message, a message as an event.

Outgoing, the body is the event's data as JSON and everything else travels
beside it: the message id is the event id (consumers and JetStream
de-duplicate by it), the routing key or subject is `{category}.{type}`, and
headers carry the stream, version, position, causation id, W3C
`traceparent` and the event's tags (`eventcraft-tags`, a JSON array, only
when it has some) so a consumer can order, trace, de-duplicate and route
without parsing the body.

Incoming, the event id is derived from the inbox's name and the message id
(UUID-5 in a namespace of ours), so the same id in the same inbox always gives
the same event id and a redelivery or a producer's retry is stored once, while
the same id taken by two inboxes is two messages. A message id, even a UUID,
is never an event id as it is: a producer cannot name an event it did not send.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from eventcraft.eventstore import RecordedEvent, category_of

from .errors import InvalidMessage

INBOX_NAMESPACE = uuid.UUID("0b6e4c1d-8f3a-5e27-b9d4-61c7a2f05e83")
"""The namespace of the UUID-5 event ids made from an inbox's name and a message id."""
UNSCOPED_NAMESPACE = uuid.UUID("6f1c2b9e-4d0a-5b7e-9c3f-2a8d1e5b7c40")
"""The namespace of the ids inboxes stored messages under before ids were scoped
to an inbox: a message id that was not a UUID was hashed here, with nothing else."""
MAX_MESSAGE_ID = 200
TAGS_HEADER = "eventcraft-tags"
"""The header of an event's tags: a JSON array of strings; absent when it has none.

Example::

    from eventcraft.messaging import TAGS_HEADER, IncomingMessage

    message = IncomingMessage("msg-1", b"{}", headers={TAGS_HEADER: '["vip", "eu"]'})
    assert message.tags == ("vip", "eu")
"""


@dataclass(frozen=True)
class OutgoingMessage:
    """An event as the relay publishes it: what a `Publisher` is handed.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.messaging import OutgoingMessage, Publisher, Relay

        class Kept(Publisher):  # keeps what it is handed, as a test's publisher would
            broker = "memory"

            def __init__(self):
                self.messages: list[OutgoingMessage] = []

            def publish(self, messages):
                self.messages.extend(messages)

            def close(self):
                pass

        store = EventStore.open("sqlite:///shop.db")
        store.append("order-7", [NewEvent("OrderPlaced", {"cents": 1600}, tags=["vip"])])
        kept = Kept()
        with Relay("orders-out", store, kept) as relay:
            relay.catch_up()
        [message] = kept.messages
        assert (message.subject, message.body) == ("order.OrderPlaced", b'{"cents":1600}')
        assert message.message_id == str(next(store.read_all()).id)
        assert message.headers["eventcraft-version"] == "1"
        assert message.headers["eventcraft-tags"] == '["vip"]'
    """

    message_id: str
    """The event id: the key consumers and JetStream de-duplicate by."""
    subject: str
    """`{category}.{type}`: RabbitMQ's routing key; NATS prefixes it."""
    body: bytes
    """The event's data as JSON."""
    headers: dict[str, str]
    """Stream, version, position, type, causation id, traceparent and tags."""
    correlation_id: str | None
    stream_id: str
    position: int


def outgoing(event: RecordedEvent) -> OutgoingMessage:
    metadata = event.metadata
    headers = {
        "eventcraft-stream": event.stream_id,
        "eventcraft-version": str(event.version),
        "eventcraft-position": str(event.position),
        "eventcraft-type": event.type,
        "eventcraft-recorded-at": event.recorded_at.isoformat(),
    }
    for key, header in (
        ("causation_id", "eventcraft-causation-id"),
        ("traceparent", "traceparent"),
    ):
        value = metadata.get(key)
        if value is not None:
            headers[header] = str(value)
    if event.tags:
        headers[TAGS_HEADER] = orjson.dumps(event.tags).decode()
    correlation = metadata.get("correlation_id")
    return OutgoingMessage(
        message_id=str(event.id),
        subject=f"{category_of(event.stream_id)}.{event.type}",
        body=orjson.dumps(event.data),
        headers=headers,
        correlation_id=None if correlation is None else str(correlation),
        stream_id=event.stream_id,
        position=event.position,
    )


@dataclass(frozen=True)
class IncomingMessage:
    """A message taken in from a queue, a JetStream consumer or an HTTP request.

    Example::

        from eventcraft.messaging import IncomingMessage

        message = IncomingMessage(
            message_id="order-7-placed",
            body=b'{"order": 7, "cents": 1600}',
            headers={"eventcraft-tags": '["vip"]'},
            subject="order.OrderPlaced",
        )
        assert message.json() == {"order": 7, "cents": 1600}
        assert message.tags == ("vip",)
    """

    message_id: str
    """The producer's id for it; the same id is the same message."""
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)
    subject: str = ""
    """The routing key or subject it came with (the path of an HTTP intake)."""

    def json(self) -> Any:
        """The body as JSON; `InvalidMessage` if it is not."""
        try:
            return orjson.loads(self.body)
        except orjson.JSONDecodeError as error:
            raise InvalidMessage(
                f"message {self.message_id!r}: the body is not JSON ({error})"
            ) from None

    @property
    def tags(self) -> tuple[str, ...]:
        """The tags a relay sent with the event (the `eventcraft-tags` header); none
        without the header. `InvalidMessage` if the header is not a JSON array of strings.

        A mapping that keeps them, `Mapped(..., tags=message.tags)`, stores the event
        with the tags it had in the store it came from."""
        found = self.headers.get(TAGS_HEADER)
        if found is None:
            return ()
        try:
            tags = orjson.loads(found)
        except orjson.JSONDecodeError:
            tags = None
        if not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags):
            raise InvalidMessage(
                f"message {self.message_id!r}: the {TAGS_HEADER} header is not a JSON array "
                f"of strings: {found!r:.200}"
            )
        return tuple(tags)


def check_message_id(message_id: str) -> str:
    """`message_id` if it can be one: 1 to 200 printable characters; else `InvalidMessage`."""
    if not isinstance(message_id, str) or not message_id.strip():
        raise InvalidMessage(f"a message needs a non-empty message id, not {message_id!r}")
    if len(message_id) > MAX_MESSAGE_ID or not message_id.isprintable():
        raise InvalidMessage(
            f"a message id is at most {MAX_MESSAGE_ID} printable characters, "
            f"not {message_id[:MAX_MESSAGE_ID]!r}..."
        )
    return message_id


def event_id_for(inbox: str, message_id: str) -> uuid.UUID:
    """The event id the inbox named `inbox` stores the message `message_id` under.

    The same pair always gives the same id; another inbox, another id. Neither part
    may hold a newline (names and ids are printable), so the pair is read one way only.

    Example::

        from eventcraft.eventstore import EventStore
        from eventcraft.messaging import Inbox, IncomingMessage, Mapped, event_id_for

        store = EventStore.open("sqlite:///shop.db")
        with Inbox("orders-in", store, lambda m: Mapped("order-7", "Received", m.json())) as inbox:
            inbox.take(IncomingMessage("msg-1", b'{"order": 7}'))

        event = store.read_event(event_id_for("orders-in", "msg-1"))
        assert event is not None and event.stream_id == "order-7"
        assert event_id_for("orders-in", "msg-1") != event_id_for("audit-in", "msg-1")
    """
    if not isinstance(inbox, str) or not inbox or not inbox.isprintable():
        raise InvalidMessage(f"an inbox name is printable characters, not {inbox!r}")
    return uuid.uuid5(INBOX_NAMESPACE, f"{inbox}\n{check_message_id(message_id)}")


def unscoped_event_id(message_id: str) -> uuid.UUID:
    """The id inboxes stored `message_id` under before ids were scoped to an inbox:
    itself if a UUID, else its UUID-5 in `UNSCOPED_NAMESPACE`."""
    try:
        return uuid.UUID(check_message_id(message_id))
    except ValueError:
        return uuid.uuid5(UNSCOPED_NAMESPACE, message_id)
