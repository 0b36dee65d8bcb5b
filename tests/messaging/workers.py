"""Processes for the messaging tests (spawned: module-level functions only)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eventcraft.eventstore import ANY, EventStore, NewEvent
from eventcraft.messaging import (
    Inbox,
    IncomingMessage,
    InvalidMessage,
    JetStreamSource,
    Mapped,
    RabbitMQSource,
    Relay,
    Source,
    event_id_for,
)

from .brokers import make_publisher


def relay_forever(store_url: str, spec: str, batch_size: int) -> None:
    """Follow the log and publish it until killed; a short lease so a successor takes over."""
    kind, url, name = spec.split("|")
    with EventStore.open(store_url) as store:
        relay = Relay(
            "killed-relay",
            store,
            make_publisher(kind, url, name),
            batch_size=batch_size,
            lease_ttl=1.0,
            max_backoff=0.5,
        )
        relay.run()


def order_received(message: IncomingMessage) -> Mapped:
    """The tests' mapping: `{"order": n}` becomes OrderReceived in order-{n}."""
    body = message.json()
    if not isinstance(body, dict) or "order" not in body:
        raise InvalidMessage(f"not an order: {body!r}")
    return Mapped(f"order-{body['order']}", "OrderReceived", body)


class TrappedStore(EventStore):
    """A store whose append of one message's event commits, then hangs: killed there,
    the inbox has stored the message and not acknowledged it."""

    trap: uuid.UUID | None = None
    marker: Path | None = None

    def append(
        self,
        stream_id: str,
        events: Sequence[NewEvent],
        expected_version: Any = ANY,
        *,
        condition: Any = None,
    ) -> Any:
        result = super().append(stream_id, events, expected_version, condition=condition)
        if self.trap is not None and any(e.id == self.trap for e in events):
            assert self.marker is not None
            self.marker.write_text("appended")
            time.sleep(3600)
        return result


def make_source(spec: str, ack_wait: float = 2.0) -> Source:
    kind, url, name = spec.split("|")
    if kind == "rabbitmq":
        return RabbitMQSource(url, queue=name, timeout=3)
    stream, subject = name.split(":")
    return JetStreamSource(
        url,
        stream=stream,
        durable="inbox",
        subject=subject,
        id_header="Message-Id",
        ack_wait=ack_wait,
        timeout=3,
    )


def take_in_until_killed(store_url: str, spec: str, trap: str | None, marker: str) -> None:
    """Run an inbox; with `trap`, hang right after that message's append committed."""
    store = TrappedStore.open(store_url)
    assert isinstance(store, TrappedStore)
    if trap is not None:
        store.trap = event_id_for("orders-in", trap)
        store.marker = Path(marker)
    with Inbox("orders-in", store, order_received, make_source(spec), batch_size=10) as inbox:
        inbox.run()


class RacingStore(EventStore):
    """A store whose every append waits for the other processes' at `barrier`: each has
    done all it does before its append, and they append at once."""

    barrier: Any = None

    def append(
        self,
        stream_id: str,
        events: Sequence[NewEvent],
        expected_version: Any = ANY,
        *,
        condition: Any = None,
    ) -> Any:
        if self.barrier is not None:
            self.barrier.wait(60)
        return super().append(stream_id, events, expected_version, condition=condition)


def take_racing(store_url: str, barrier: Any, messages: list[tuple[str, bytes]]) -> list[str]:
    """Take `messages` in turn, each append at once with the other processes'; the ids of
    those taken as stored (the others went to the error store)."""
    store = RacingStore.open(store_url)
    assert isinstance(store, RacingStore)
    store.barrier = barrier
    with store, Inbox("orders-in", store, order_received) as inbox:
        return [m for m, body in messages if inbox.take(IncomingMessage(m, body)) is not None]
