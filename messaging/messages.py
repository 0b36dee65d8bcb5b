"""What crosses to a broker and back: an event as a message, a message as an event.

Outgoing, the body is the event's data as JSON and everything else travels
beside it: the message id is the event id (consumers and JetStream
de-duplicate by it), the routing key or subject is `{category}.{type}`, and
headers carry the stream, version, position, causation id, W3C
`traceparent` and the event's tags (`eventcraft-tags`, a JSON array, only
when it has some) so a consumer can order, trace, de-duplicate and route
without parsing the body.

Incoming, the message id becomes the event id: a message id that is a UUID
is used as it is, any other is turned into one by UUID-5 in a namespace of
ours, so the same id always gives the same event id and a redelivery or a
producer's retry is stored once.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from eventcraft.eventstore import RecordedEvent, category_of

from .errors import InvalidMessage

MESSAGE_NAMESPACE = uuid.UUID("6f1c2b9e-4d0a-5b7e-9c3f-2a8d1e5b7c40")
"""The namespace of UUID-5 event ids made from message ids that are not UUIDs."""
MAX_MESSAGE_ID = 200
TAGS_HEADER = "eventcraft-tags"
"""The header of an event's tags: a JSON array of strings; absent when it has none."""


@dataclass(frozen=True)
class OutgoingMessage:
    """An event as the relay publishes it."""

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
    """A message taken in from a queue, a JetStream consumer or an HTTP request."""

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
    def event_id(self) -> uuid.UUID:
        return event_id_for(self.message_id)

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


def event_id_for(message_id: str) -> uuid.UUID:
    """The event id a message id is stored under: itself if a UUID, else its UUID-5."""
    if not isinstance(message_id, str) or not message_id.strip():
        raise InvalidMessage(f"a message needs a non-empty message id, not {message_id!r}")
    if len(message_id) > MAX_MESSAGE_ID or not message_id.isprintable():
        raise InvalidMessage(
            f"a message id is at most {MAX_MESSAGE_ID} printable characters, "
            f"not {message_id[:MAX_MESSAGE_ID]!r}..."
        )
    try:
        return uuid.UUID(message_id)
    except ValueError:
        return uuid.uuid5(MESSAGE_NAMESPACE, message_id)
