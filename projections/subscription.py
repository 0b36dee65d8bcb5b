"""A subscriber: a named handler with its own checkpoint and effects outside the database."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from eventcraft.eventstore import Query, RecordedEvent

from .definition import Definition, checked_names
from .errors import DefinitionError
from .policy import ErrorPolicy
from .read_model import ReadModel
from .typed_event import EventDecoder, TypedEvent

Delivery = (
    Callable[[RecordedEvent], None]
    | Callable[[RecordedEvent], Awaitable[None]]
    | Callable[[TypedEvent[Any]], None]
    | Callable[[TypedEvent[Any]], Awaitable[None]]
)
"""A subscription's handler: given the event as stored, or typed with a registry."""


class Subscription(Definition):
    """Deliver events of some categories and types to `handler`, at least once.

    `query` (an eventstore `Query` of types and tags) narrows it to the
    events matching it, as `categories` and `types` do:
    `Subscription("roster", enrol, query=Query([QueryItem(tags=["course:c1"])]))`.

    With `registry` (the application's `EventRegistry`) the handler receives
    each event as a `TypedEvent`, typed and upcast as a repository's load
    decodes it, and `where` its typed `data`; an event the registry cannot
    decode fails as the handler failing would, under `on_error`.

    The checkpoint moves only after the handler returned, so a crash between
    the two delivers the event again: make the handler idempotent, with the
    event's id as the de-duplication key. Each subscription reads the log
    independently of every other.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent, RecordedEvent
        from eventcraft.projections import ProjectionRunner, Subscription

        sent = {}

        def send_receipt(event: RecordedEvent) -> None:
            sent[str(event.id)] = event.data["total"]  # keyed by the event's id: idempotent

        receipts = Subscription("receipts", send_receipt,
                                types=["OrderPaid"], where=lambda data: data["total"] > 0)
        store = EventStore.open("sqlite:///shop.db")
        store.append("order-1", [NewEvent("OrderPaid", {"total": 1200})])
        store.append("order-2", [NewEvent("OrderPaid", {"total": 0})])  # free: no receipt
        with ProjectionRunner(store, [receipts]) as runner:
            runner.catch_up()
        assert list(sent.values()) == [1200]
        store.close()
    """

    in_transaction = False

    def __init__(
        self,
        name: str,
        handler: Delivery,
        *,
        categories: Sequence[str] | str | None = None,
        query: Query | None = None,
        types: Sequence[str] | str | None = None,
        where: Callable[[Mapping[str, Any]], bool] | Callable[[Any], bool] | None = None,
        on_error: ErrorPolicy | None = None,
        registry: EventDecoder | None = None,
    ) -> None:
        super().__init__(
            name, categories=categories, query=query, on_error=on_error, registry=registry
        )
        if not callable(handler):
            raise DefinitionError(f"{name}: the handler must be callable, not {handler!r}")
        if where is not None and not callable(where):
            raise DefinitionError(f"{name}: where must be callable or None, not {where!r}")
        self.handler: Callable[[Any], Any] = handler
        self.where: Callable[[Any], bool] | None = where
        self._types = checked_names(name, "types", types)

    @property
    def types(self) -> tuple[str, ...] | None:
        return self._types

    def deliver(self, event: RecordedEvent) -> None:
        """Hand `event` to the handler if it passes `where`; the runner calls this."""
        delivered: RecordedEvent | TypedEvent[Any] = event
        if self.registry is not None:
            delivered = TypedEvent.decoded(self.registry, event)
        if self.where is None or self.where(delivered.data):
            outcome = self.handler(delivered)
            if inspect.isawaitable(outcome):
                if inspect.iscoroutine(outcome):
                    outcome.close()  # never awaited: no "never awaited" warning either
                raise DefinitionError(
                    f"{self.name}: the handler is a coroutine function; run it with "
                    "AsyncProjectionRunner, which awaits it on the caller's loop"
                )

    def apply(self, read_model: ReadModel, events: Sequence[RecordedEvent]) -> None:
        # Effects lie outside the database: the read model is not used.
        for event in events:
            self.deliver(event)
