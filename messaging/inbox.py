"""The inbox: messages from a queue stored as events once each, acknowledged after commit.

Each message becomes one event in the stream the user's mapping names, with
an event id derived from the inbox's name and the message id (`event_id_for`):
two inboxes taking the same id take two messages. The store keeps an
append whose ids are stored already as a retry: it writes nothing and
answers as the first time. So a broker's redelivery, a producer's retry
and an inbox killed between its append and its ack all store the message
once. The ack goes to the broker only after the append committed; a crash
before it makes the broker deliver again, which is safe.

A retry carries the same body; a message id stored already, sent with
another body, is no retry but a conflict. The event's metadata keeps the
SHA-256 of the message's body, and after every append the inbox reads the
event stored under the id back and compares the two: the same body is a
retry (answered as the first time, nothing written), another body raises
`MessageIdConflict`, whichever stream the mapping names. Read back after
the append, not before it, so that two deliveries racing with one id end
with one event and the other told apart, whichever commits first.

A message that cannot be stored (no id, a body the mapping cannot read, a
mapping that raises, an event the store refuses, a conflict) goes to the
error store and is acknowledged: it waits there for an operator to resend it
(`eventcraft messaging resend`), which the running inbox then does with its
mapping, or to discard it (kept there, marked discarded). When the store
itself is unreachable nothing is acknowledged: the inbox drops its
connection, backs off and takes the messages again.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import sqlalchemy as sa
from eventcraft.eventstore import (
    ANY,
    AppendResult,
    DuplicateEventId,
    EventStore,
    NewEvent,
    RecordedEvent,
    StoreUnavailable,
)
from eventcraft.projections import Database

from . import failed, telemetry
from .errors import BrokerUnavailable, MessageIdConflict, MessagingConfigError
from .failed import FailedMessage
from .messages import IncomingMessage, event_id_for, unscoped_event_id
from .source import Source

log = logging.getLogger("eventcraft.messaging")

_FIRST_BACKOFF = 0.1
BODY_HASH = "message_sha256"
"""The metadata key of the SHA-256 of the message's body."""


def body_hash(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def same_message(stored: RecordedEvent, message: IncomingMessage) -> None:
    """Nothing if `stored`, the event under `message`'s id, holds that message: a retry;
    `MessageIdConflict` if it was stored with another body."""
    kept = stored.metadata.get(BODY_HASH)
    # An event stored before inboxes kept the hash cannot be told apart: a retry, as then.
    if kept is None or kept == body_hash(message.body):
        return
    raise MessageIdConflict(
        message.message_id,
        f"it is stored with another body, as event {stored.id} of stream {stored.stream_id!r}",
    )


@dataclass(frozen=True)
class Mapped:
    """The event a message becomes: where it goes and what it says.

    An inbox's mapping returns it for each message.

    Example::

        from eventcraft.eventstore import EventStore
        from eventcraft.messaging import Inbox, IncomingMessage, Mapped

        def payment_received(message: IncomingMessage) -> Mapped:
            payment = message.json()
            return Mapped(
                stream_id=f"invoice-{payment['invoice']}",
                type="PaymentReceived",
                data={"cents": payment["cents"]},
                metadata={"received_as": message.subject},
                tags=message.tags,  # those the relay sent, kept
            )

        store = EventStore.open("sqlite:///billing.db")
        body, headers = b'{"invoice": 12, "cents": 990}', {"eventcraft-tags": '["eu"]'}
        with Inbox("payments-in", store, payment_received) as inbox:
            inbox.take(IncomingMessage("pay-1", body, headers, subject="payment.Captured"))
        event = next(store.read_stream("invoice-12"))
        assert (event.data, event.tags) == ({"cents": 990}, ("eu",))
        assert event.metadata["received_as"] == "payment.Captured"
        assert event.metadata["message_id"] == "pay-1"  # the inbox records it beside
    """

    stream_id: str
    type: str
    data: dict[str, Any]
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """Added to the event's metadata, beside the `message_id` the inbox records."""
    tags: Sequence[str] = ()
    """The event's tags (`message.tags` keeps those a relay sent)."""


Mapping_ = Callable[[IncomingMessage], Mapped]


class Inbox:
    """Stores the messages of `source` as events of `store`, once each by message id.

    With a source (`RabbitMQSource`, `JetStreamSource`), `start()` follows it in a
    thread, `run()` in this one, and `step()` takes one batch. Without a source it still
    takes messages handed to `take` (the HTTP intake does that) and keeps their error
    store.

    Example::

        from eventcraft.eventstore import EventStore
        from eventcraft.messaging import Inbox, IncomingMessage, Mapped

        def order_received(message: IncomingMessage) -> Mapped:
            order = message.json()
            return Mapped(f"order-{order['id']}", "OrderReceived", order)

        store = EventStore.open("sqlite:///shop.db")
        message = IncomingMessage("msg-1", b'{"id": 7, "cents": 1600}')
        with Inbox("orders-in", store, order_received) as inbox:
            first = inbox.take(message)
            again = inbox.take(message)  # redelivered: answered as the first time, not stored
        assert first == again and first.positions == (1,)
        assert [e.type for e in store.read_stream("order-7")] == ["OrderReceived"]

    A message id is taken once: a redelivery or a producer's retry carries the same
    body and is answered as the first time. The same id sent with another body is no
    retry, and is not dropped: `take` keeps it in the error store (acknowledged, for an
    operator to see in `eventcraft messaging failed` and the console, and to discard;
    its error is `MessageIdConflict` naming the id and the stored event), `append`
    raises `MessageIdConflict`, and the HTTP intake answers 409. The stored event is
    not changed, whichever stream the mapping names. A resend of such a message
    conflicts again: the producer sends the new content under a new id.

    Inboxes before 0.2 stored a message under an id of the message id alone; with
    `unscoped_ids` (the default) a message is first looked for there, so a redelivery
    or a retry of one stored then is not stored again. An inbox whose store holds no
    such message can pass `unscoped_ids=False` and save that read per message.
    """

    def __init__(
        self,
        name: str,
        store: EventStore,
        mapping: Mapping_,
        source: Source | None = None,
        *,
        database: Database | sa.Engine | str | None = None,
        batch_size: int = 100,
        max_backoff: float = 10.0,
        unscoped_ids: bool = True,
    ) -> None:
        if not isinstance(name, str) or not name or len(name) > 100 or not name.isprintable():
            raise MessagingConfigError(f"an inbox name is 1-100 printable characters: {name!r}")
        if not callable(mapping):
            raise MessagingConfigError(f"an inbox's mapping must be callable, not {mapping!r}")
        if source is not None and not isinstance(source, Source):
            raise MessagingConfigError(f"an inbox takes messages from a Source, not {source!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise MessagingConfigError(f"batch_size must be an int >= 1, not {batch_size!r}")
        self.name = name
        self.store = store
        self.mapping = mapping
        self.source = source
        self.batch_size = batch_size
        self.max_backoff = float(max_backoff)
        self.unscoped_ids = bool(unscoped_ids)
        self.database = Database.of(database, store)
        self._owns_database = not isinstance(database, Database | sa.Engine)
        self.stored = 0
        """Messages taken in (a redelivery of a stored one counts again)."""
        self.failed = 0
        """Messages sent to the error store."""
        self.last_error: str | None = None
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        with self.database.transaction() as connection:
            failed.create(connection)

    # --- one message -------------------------------------------------------------

    def take(self, message: IncomingMessage) -> AppendResult | None:
        """Store `message` once; None if it went to the error store instead (a message
        id stored with another body goes there too, as `MessageIdConflict`).

        Raises `StoreUnavailable` when the store cannot be reached (nothing is
        recorded: the caller must not acknowledge the message).
        """
        try:
            return self.append(message)
        except StoreUnavailable:
            raise
        except Exception as error:
            said = telemetry.told(error, telemetry.FAILED_KEPT)
            log.warning("inbox %r: message %r failed: %s", self.name, message.message_id, said)
            with self.database.transaction() as connection:
                failed.record(connection, self.name, message, error)
            self.failed += 1
            return None

    def append(self, message: IncomingMessage) -> AppendResult:
        """Store `message` once, or raise what went wrong (the error store is not used).

        A retry (its id stored with the same body) is answered as the first time and
        writes nothing; its id stored with another body raises `MessageIdConflict`.
        """
        stored = self.append_event(message)
        return AppendResult(stored.version, (stored.position,))

    def append_event(self, message: IncomingMessage) -> RecordedEvent:
        """Store `message` once, as `append` does; the event it is stored as.

        The event's metadata records the message id and the SHA-256 of its body, by
        which a retry is told from a conflict (`same_message`).
        """
        stored = self._stored_unscoped(message.message_id)
        if stored is None:
            event_id = self.event_id(message.message_id)
            mapped = self.mapping(message)
            if not isinstance(mapped, Mapped):
                raise MessagingConfigError(
                    f"inbox {self.name!r}: the mapping returned {mapped!r}, not a Mapped"
                )
            metadata = {
                **mapped.metadata,
                "message_id": message.message_id,
                BODY_HASH: body_hash(message.body),
            }
            event = NewEvent(
                mapped.type, mapped.data, metadata=metadata, id=event_id, tags=mapped.tags
            )
            # The store answers an append of a stored id as a retry, by the id alone, when
            # the stream is the same, and refuses it when the mapping names another: in
            # both cases the event under the id, read back below, says which it is.
            with contextlib.suppress(DuplicateEventId):
                self.store.append(mapped.stream_id, [event], ANY)
            stored = self.store.read_event(event_id)
            if stored is None:  # pragma: no cover - the append or an earlier one stored it
                raise StoreUnavailable(f"message {message.message_id!r} cannot be read back")
        same_message(stored, message)
        self.stored += 1
        return stored

    def event_id(self, message_id: str) -> uuid.UUID:
        """The id of the event this inbox stores the message `message_id` as."""
        return event_id_for(self.name, message_id)

    def stored_event(self, message_id: str) -> RecordedEvent | None:
        """The event this inbox stored the message `message_id` as; None if not stored."""
        found = self.store.read_event(self.event_id(message_id))
        return found if found is not None else self._stored_unscoped(message_id)

    def _stored_unscoped(self, message_id: str) -> RecordedEvent | None:
        if not self.unscoped_ids:
            return None
        found = self.store.read_event(unscoped_event_id(message_id))
        # Under a UUID message id may be any event of the store: only one an inbox
        # stored for that very message id is the message.
        if found is None or found.metadata.get("message_id") != message_id:
            return None
        return found

    # --- following a source ------------------------------------------------------

    def step(self, timeout: float = 0.5) -> int:
        """Take one batch from the source, store it, acknowledge it; how many it held."""
        source = self._source()
        self.take_resends()
        deliveries = source.receive(self.batch_size, timeout)
        for delivery in deliveries:
            self.take(delivery.message)
        source.ack(deliveries)
        return len(deliveries)

    def start(self) -> Inbox:
        self._source()
        if self._thread is not None and self._thread.is_alive():
            return self
        self._stopping.clear()
        self._thread = threading.Thread(target=self._follow, name=f"inbox:{self.name}", daemon=True)
        self._thread.start()
        return self

    def run(self) -> None:
        """Take messages in this thread until `stop()` (from another) or Ctrl-C."""
        self._source()
        self._stopping.clear()
        try:
            self._follow()
        except KeyboardInterrupt:
            return

    def stop(self, timeout: float = 10.0) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _follow(self) -> None:
        source = self._source()
        backoff = _FIRST_BACKOFF
        while not self._stopping.is_set():
            try:
                self.step()
                backoff = _FIRST_BACKOFF
                self.last_error = None
            except Exception as error:
                # The broker, the store or the error store's database failed: nothing of
                # this batch was acknowledged, and it comes again once the connection is new.
                self.last_error = f"{type(error).__name__}: {error}"
                if isinstance(error, BrokerUnavailable | StoreUnavailable):
                    log.warning("inbox %r paused: %s", self.name, error)
                else:
                    log.error(
                        "inbox %r failed; taking the batch again: %s",
                        self.name,
                        telemetry.traced(
                            error, "the inbox's last_error until a batch goes through"
                        ),
                    )
                try:
                    source.reset()
                except Exception:
                    log.exception("inbox %r: dropping the connection failed", self.name)
                self._stopping.wait(backoff)
                backoff = min(backoff * 2, self.max_backoff)

    def _source(self) -> Source:
        if self.source is None:
            raise MessagingConfigError(f"inbox {self.name!r} has no source to take messages from")
        return self.source

    # --- the error store ---------------------------------------------------------

    def failures(self) -> list[FailedMessage]:
        """The messages waiting in the error store (not those discarded)."""
        with self.database.reading() as connection:
            return failed.listed(connection, self.name)

    def retry_failed(self, message_id: str) -> AppendResult:
        """Store the failed message now with the mapping (it raises if it still fails),
        then forget it. `MessageDiscarded` if an operator discarded it."""
        with self.database.reading() as connection:
            found = failed.unsettled(connection, self.name, message_id)
        try:
            result = self.append(found.message)
        except StoreUnavailable:
            raise
        except Exception as error:
            with self.database.transaction() as connection:
                failed.record(connection, self.name, found.message, error)
            raise
        with self.database.transaction() as connection:
            failed.remove(connection, self.name, message_id)
        return result

    def take_resends(self) -> None:
        """Store the failed messages an operator asked to resend; `step` does this each time."""
        with self.database.reading() as connection:
            asked = failed.to_resend(connection, self.name, self.batch_size)
        for message in asked:
            try:
                self.retry_failed(message.message_id)
            except StoreUnavailable:
                raise
            except Exception as error:
                log.warning(
                    "inbox %r: resent message %r failed again: %s",
                    self.name,
                    message.message_id,
                    telemetry.told(error, telemetry.FAILED_KEPT),
                )

    # --- closing -----------------------------------------------------------------

    def close(self) -> None:
        self.stop()
        if self.source is not None:
            self.source.close()
        if self._owns_database:
            self.database.close()

    def __enter__(self) -> Inbox:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
