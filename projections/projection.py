"""A read model kept by handlers, one per event type."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import sqlalchemy as sa
from eventcraft.eventstore import Query, RecordedEvent

from .definition import Definition, checked_names, note_failure
from .errors import DefinitionError
from .policy import ErrorPolicy
from .read_model import ReadModel
from .typed_event import EventDecoder, TypedEvent

Handler = Callable[[ReadModel, RecordedEvent], None] | Callable[[ReadModel, TypedEvent[Any]], None]
"""A projection's handler of one event type: the event as stored, or typed with a registry.

Example::

    import sqlalchemy as sa
    from eventcraft.eventstore import RecordedEvent
    from eventcraft.projections import Handler, Projection, ReadModel

    orders = sa.Table("orders", sa.MetaData(), sa.Column("order_id", sa.Text, primary_key=True))

    def placed(read_model: ReadModel, event: RecordedEvent) -> None:
        read_model.execute(sa.insert(read_model[orders]).values(order_id=event.stream_id))

    handlers: dict[str, Handler] = {"OrderPlaced": placed, "OrderImported": placed}
    order_list = Projection("order-list", tables=[orders])
    for event_type, handler in handlers.items():
        order_list.on(event_type)(handler)
    assert order_list.types == ("OrderImported", "OrderPlaced")
"""

H = TypeVar("H", bound=Handler)


class Projection(Definition):
    """A read model: its tables, and a handler per event type that writes to them.

    With `query` (an eventstore `Query` of types and tags) it reads only the
    events of its handlers' types that match the query.

    With `registry` (the application's `EventRegistry`) each handler receives
    a `TypedEvent`: its `data` the typed event, upcast to today's schema,
    exactly as a repository's load decodes it, beside the envelope as stored.
    An event the registry cannot decode (a type it does not know, data that
    does not fit) fails as the handler failing would, under `on_error`.

    Handlers run inside the transaction that also moves the checkpoint, so
    each event changes the read model exactly once. They must act only
    through `read_model`: the same definition runs live and in a rebuild.

    Example::

        import sqlalchemy as sa
        from eventcraft.eventstore import EventStore, NewEvent, RecordedEvent
        from eventcraft.projections import Projection, ProjectionRunner, ReadModel

        orders = sa.Table(
            "orders_by_customer", sa.MetaData(),
            sa.Column("order_id", sa.Text, primary_key=True),
            sa.Column("customer", sa.Text, nullable=False),
        )
        by_customer = Projection("orders-by-customer", tables=[orders])

        @by_customer.on("OrderPlaced")
        def placed(read_model: ReadModel, event: RecordedEvent) -> None:
            row = {"order_id": event.stream_id, "customer": event.data["customer"]}
            read_model.execute(sa.insert(read_model[orders]).values(**row))

        store = EventStore.open("sqlite:///shop.db")
        store.append("order-1", [NewEvent("OrderPlaced", {"customer": "ann"})])
        with ProjectionRunner(store, [by_customer]) as runner:
            runner.catch_up()
            with runner.database.reading() as connection:
                assert connection.execute(sa.select(orders)).all() == [("order-1", "ann")]
        store.close()
    """

    def __init__(
        self,
        name: str,
        *,
        tables: Iterable[sa.Table],
        categories: Sequence[str] | str | None = None,
        query: Query | None = None,
        on_error: ErrorPolicy | None = None,
        registry: EventDecoder | None = None,
    ) -> None:
        super().__init__(
            name,
            tables=tables,
            categories=categories,
            query=query,
            on_error=on_error,
            registry=registry,
        )
        self._handlers: dict[str, Callable[[ReadModel, Any], None]] = {}

    def on(self, *event_types: str) -> Callable[[H], H]:
        """Register the decorated function as the handler of `event_types`."""
        checked = checked_names(self.name, "event types", event_types) or ()

        def register(handler: H) -> H:
            if not callable(handler):
                raise DefinitionError(f"{self.name}: a handler must be callable, not {handler!r}")
            for event_type in checked:
                if event_type in self._handlers:
                    raise DefinitionError(
                        f"{self.name}: {event_type!r} already has a handler "
                        f"({self._handlers[event_type].__qualname__})"
                    )
                self._handlers[event_type] = handler
            return handler

        return register

    @property
    def types(self) -> tuple[str, ...]:
        if not self._handlers:
            raise DefinitionError(f"{self.name}: a projection needs at least one handler")
        return tuple(sorted(self._handlers))

    def apply(self, read_model: ReadModel, events: Sequence[RecordedEvent]) -> None:
        handlers, decoder = self._handlers, self.registry
        for event in events:
            try:
                if decoder is None:
                    handlers[event.type](read_model, event)
                else:
                    handlers[event.type](read_model, TypedEvent.decoded(decoder, event))
            except Exception as error:
                note_failure(error, self.name, event)
                raise
