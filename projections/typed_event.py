"""Typed events: what a definition given the application's registry reads.

An aggregate never sees an event as stored: its repository decodes each one
through the application's `EventRegistry`, running the upcasters, into the
typed event of today's schema. A projection, fold or subscription given the
same registry (`registry=`) reads the same typed events, so an event that
evolves changes a read model no more than it changes an aggregate.

Projections may not import the domain (both sit above the store), so the
registry is taken as the small port `EventDecoder`, which `EventRegistry`
satisfies as it is. Decoding happens inside the definition, where it calls
its own functions (`Projection.apply`, `Fold.fold`, `Subscription.deliver`,
a Spark replay's tasks): every runner delivers the same typed events, and
the runners, the error store and the checkpoints keep handling events as
stored.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from eventcraft.eventstore import RecordedEvent, category_of

from .errors import DefinitionError

D = TypeVar("D")


@runtime_checkable
class EventDecoder(Protocol):
    """Turns an event as stored into the typed event the application reads.

    `eventcraft.domain.EventRegistry` is one: its `decode` runs the event's
    upcasters and validates the data into the registered class, or raises
    (`UnknownEventType` for a type without a class, `NoUpcastPath`,
    `EventDecodingError`), exactly as it does for a repository's load.

    Example::

        from eventcraft.domain import EventRegistry
        from eventcraft.eventstore import EventStore, NewEvent, RecordedEvent
        from eventcraft.projections import EventDecoder, ProjectionRunner, Subscription

        class Cents:  # any object with decode(recorded) is one
            def decode(self, recorded: RecordedEvent) -> int:
                return recorded.data["cents"]

        assert isinstance(EventRegistry(), EventDecoder) and isinstance(Cents(), EventDecoder)
        paid = []
        receipts = Subscription("receipts", lambda event: paid.append(event.data), registry=Cents())
        store = EventStore.open("sqlite:///shop.db")
        store.append("order-1", [NewEvent("OrderPaid", {"cents": 1200})])
        with ProjectionRunner(store, [receipts]) as runner:
            runner.catch_up()
        assert paid == [1200]
        store.close()
    """

    def decode(self, recorded: RecordedEvent) -> Any:
        """The typed event `recorded` holds, brought to today's schema."""


@dataclass(frozen=True, slots=True)
class TypedEvent(Generic[D]):
    """An event as a definition given a registry receives it: `data` is the typed event
    (the one a repository's load decodes), and the rest is the event's envelope as stored.

    Example::

        import sqlalchemy as sa
        from eventcraft.domain import DomainEvent, EventRegistry
        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections import Projection, ProjectionRunner, ReadModel, TypedEvent

        bank_events = EventRegistry()

        @bank_events.event("MoneyDeposited")
        class MoneyDeposited(DomainEvent):
            amount_cents: int

        deposits_table = sa.Table("deposits", sa.MetaData(),
                                  sa.Column("position", sa.BigInteger, primary_key=True),
                                  sa.Column("cents", sa.BigInteger, nullable=False))
        deposits = Projection("deposits", tables=[deposits_table], registry=bank_events)

        @deposits.on("MoneyDeposited")
        def deposited(read_model: ReadModel, event: TypedEvent[MoneyDeposited]) -> None:
            read_model.execute(sa.insert(read_model[deposits_table]).values(
                position=event.position, cents=event.data.amount_cents))

        store = EventStore.open("sqlite:///bank.db")
        store.append("account-1", [NewEvent("MoneyDeposited", {"amount_cents": 500})])
        with ProjectionRunner(store, [deposits]) as runner:
            runner.catch_up()
            with runner.database.reading() as connection:
                assert connection.execute(sa.select(deposits_table)).all() == [(1, 500)]
        store.close()
    """

    data: D
    """The typed event, upcast to today's schema: what `registry.decode(recorded)` returns."""
    recorded: RecordedEvent
    """The event as stored, its data as written (at the schema version it was written at)."""

    @classmethod
    def decoded(cls, decoder: EventDecoder, recorded: RecordedEvent) -> TypedEvent[Any]:
        """`recorded` with its data decoded by `decoder`; raises what the decoder raises."""
        return TypedEvent(decoder.decode(recorded), recorded)

    @property
    def id(self) -> uuid.UUID:
        """The id the event was appended with."""
        return self.recorded.id

    @property
    def stream_id(self) -> str:
        """The stream it belongs to, `category-id`."""
        return self.recorded.stream_id

    @property
    def version(self) -> int:
        """Its position within the stream, from 1."""
        return self.recorded.version

    @property
    def position(self) -> int:
        """Its position in the global log."""
        return self.recorded.position

    @property
    def type(self) -> str:
        """The event's stored type name."""
        return self.recorded.type

    @property
    def metadata(self) -> dict[str, Any]:
        """Its metadata as stored (`event_version` is the schema version it was written at)."""
        return self.recorded.metadata

    @property
    def recorded_at(self) -> datetime:
        """When the store wrote it, timezone-aware (UTC)."""
        return self.recorded.recorded_at

    @property
    def tags(self) -> tuple[str, ...]:
        """Its tags, sorted."""
        return self.recorded.tags

    @property
    def category(self) -> str:
        """The category of its stream."""
        return category_of(self.recorded.stream_id)


def checked_decoder(name: str, registry: object) -> EventDecoder | None:
    """`registry` if it can decode events (or None, for events as stored)."""
    if registry is None:
        return None
    if not callable(getattr(registry, "decode", None)):
        raise DefinitionError(
            f"{name}: registry must decode events (an EventRegistry, or any object with "
            f"decode(recorded)), not {registry!r:.80}"
        )
    return registry  # type: ignore[return-value]
