"""React to the log: start, continue or cancel saga instances from the events that concern them.

A process manager is a set of routes, each an event type (and a test of
its data) and what it does to the saga instance the event names:

    manager = ProcessManager("fulfilment-pm", orchestrator, [
        Route("OrderPlaced", order_fulfilment, "start", saga_id=lambda e: e.data["order_id"],
              data=lambda e: e.data),
        Route("PaymentReceived", order_fulfilment, "signal", saga_id=lambda e: e.data["order_id"]),
        Route("OrderCancelled", order_fulfilment, "cancel", saga_id=lambda e: e.data["order_id"]),
    ])
    runner = ProjectionRunner(store, [manager.subscription()])

Given the application's registry (`registry=`, an `EventRegistry`), the
routes' functions receive each event as a projections `TypedEvent`, typed
and upcast as a repository's load decodes it (`lambda e: e.data.order_id`);
a start's data is then the typed event, and a signal hands the saga the
upcast data too. Both keep the event's personal fields (those its model
marks `Personal`) sealed in the saga's copy, under the same subjects; a
saga started so is its event's stream's (`Route(subject=...)` names
another), which is whose its `Personal()` fields are, as they are the
event's. Without a registry the data is copied as read, in the clear.

A route with `tags` takes only the events carrying them, and the manager's
subscription then reads by a query of types and tags (the store's tag index).

It reads the log through a projections `Subscription` (its own checkpoint,
at-least-once delivery), which is safe because every route is idempotent:
a start is keyed by the saga id, a signal by the event's id, and a cancel
of an instance no longer running does nothing. The orchestrator's own loop
(`Orchestrator.run`) then carries the instances forward.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from eventcraft.eventstore import InvalidEvent, Query, QueryItem, RecordedEvent
from eventcraft.projections import EventDecoder, Subscription, TypedEvent
from pydantic import BaseModel

from . import telemetry
from .definition import Saga
from .errors import SagaDefinitionError
from .orchestrator import Orchestrator

RouteAction = Literal["start", "signal", "cancel"]
"""What a route does to its saga instance (not to be confused with a step's `Action`)."""


def _always(event: RecordedEvent) -> bool:
    return True


def _the_data(event: RecordedEvent) -> dict[str, Any] | BaseModel:
    data: dict[str, Any] | BaseModel = event.data
    return data if isinstance(data, BaseModel) else dict(data)


def _the_stream(event: RecordedEvent) -> str | None:
    return event.stream_id


def _as_json(data: Any) -> dict[str, Any]:
    """An event's data as stored (a dict), or a typed event's (a pydantic model) as JSON."""
    if isinstance(data, Mapping):
        return dict(data)
    dumped: dict[str, Any] = data.model_dump(mode="json")
    return dumped


@dataclass(frozen=True)
class Route:
    """Events of `event_type` carrying all of `tags` for which `when(event)` holds do
    `action` to the saga instance with id `saga_id(event)`; a start gives it `data(event)`
    (the event's data by default).

    Example::

        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections import ProjectionRunner
        from eventcraft.sagas import Orchestrator, ProcessManager, Route, Saga, Step

        def ask_a_clerk(data, context): ...

        review = Saga("review", [Step("ask", ask_a_clerk)])
        big_orders = Route(
            "OrderPlaced",
            review,
            "start",
            saga_id=lambda event: event.stream_id,  # order-2's review is "order-2"
            when=lambda event: event.data["cents"] >= 100_000,  # only these are reviewed
            data=lambda event: {"cents": event.data["cents"]},  # the saga's start data
        )
        store = EventStore.open("sqlite:///shop.db")
        orchestrator = Orchestrator(store, [review])
        manager = ProcessManager("review-manager", orchestrator, [big_orders])
        runner = ProjectionRunner(store, [manager.subscription()])
        store.append("order-1", [NewEvent("OrderPlaced", {"sku": "tea", "cents": 1200})])
        store.append("order-2", [NewEvent("OrderPlaced", {"sku": "piano", "cents": 250_000})])
        runner.catch_up()
        started = [(saga.saga_id, saga.data) for saga in orchestrator.instances()]
        assert started == [("order-2", {"cents": 250_000})]
        runner.close()
        store.close()
    """

    event_type: str
    saga: Saga
    action: RouteAction
    # Each takes the event as stored, or a `TypedEvent` with the manager's registry.
    saga_id: Callable[[Any], str]
    when: Callable[[Any], bool] = _always
    data: Callable[[Any], dict[str, Any] | BaseModel] = _the_data
    subject: Callable[[Any], str | None] = _the_stream
    """Whose a started saga's personal data is (`Orchestrator.start(subject=)`): the
    event's stream by default; asked only when the start's data is a model."""
    tags: Sequence[str] = ()
    """Tags the event must carry, all of them (`["region:eu"]`); read through the store's
    tag index, as a `Query` of types and tags."""

    def __post_init__(self) -> None:
        if self.action not in ("start", "signal", "cancel"):
            raise SagaDefinitionError(f"a route starts, signals or cancels, not {self.action!r}")
        if not isinstance(self.saga, Saga):
            raise SagaDefinitionError(f"a route leads to a Saga, not {self.saga!r}")
        try:
            item = QueryItem(types=[self.event_type], tags=self.tags)
        except InvalidEvent as error:
            raise SagaDefinitionError(f"a route's event type and tags: {error}") from None
        object.__setattr__(self, "tags", item.tags)

    def item(self) -> QueryItem:
        """The events this route reads, as an item of a query."""
        return QueryItem(types=[self.event_type], tags=self.tags)

    def takes(self, event: RecordedEvent | TypedEvent[Any]) -> bool:
        return (
            event.type == self.event_type
            and (not self.tags or set(self.tags).issubset(event.tags))
            and self.when(event)
        )


class ProcessManager:
    """Starts, signals and cancels saga instances from the events its routes match.

    It reads the log through `subscription()`, which a projections
    `ProjectionRunner` runs; the orchestrator then carries the sagas forward.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections import ProjectionRunner
        from eventcraft.sagas import Orchestrator, ProcessManager, Route, Saga, Step, wait_for

        def reserve(data, context):
            return {"reserved": data["sku"]}

        steps = [Step("reserve", reserve), wait_for("payment", "OrderPaid")]
        fulfilment = Saga("fulfilment", steps)
        store = EventStore.open("sqlite:///shop.db")
        orchestrator = Orchestrator(store, [fulfilment])
        manager = ProcessManager("fulfilment-manager", orchestrator, [
            Route("OrderPlaced", fulfilment, "start", saga_id=lambda event: event.stream_id),
            Route("OrderPaid", fulfilment, "signal", saga_id=lambda event: event.stream_id),
        ])
        runner = ProjectionRunner(store, [manager.subscription()])
        store.append("order-1", [NewEvent("OrderPlaced", {"sku": "tea"})])
        store.append("order-1", [NewEvent("OrderPaid", {"cents": 1200})])
        runner.catch_up()  # the manager starts order-1's saga, then hands it the payment
        assert orchestrator.run_pending() == 0  # which runs it to its end
        state = orchestrator.state("fulfilment", "order-1")
        assert (state.status, state.data) == ("completed", {"sku": "tea"})
        assert state.results["payment"] == {"cents": 1200}
        runner.close()
        store.close()
    """

    def __init__(
        self,
        name: str,
        orchestrator: Orchestrator,
        routes: Sequence[Route],
        *,
        registry: EventDecoder | None = None,
    ) -> None:
        self.name = name
        self.registry = registry
        """With it, routes receive `TypedEvent`s (see the module's docstring)."""
        self.orchestrator = orchestrator
        self.routes = tuple(routes)
        if not self.routes:
            raise SagaDefinitionError(f"process manager {name!r} needs at least one route")
        for route in self.routes:
            orchestrator.definition(route.saga.name)  # fail now, not at the first event

    def subscription(self) -> Subscription:
        """The subscription to run in a `projections.ProjectionRunner`."""
        if any(route.tags for route in self.routes):
            query = Query([route.item() for route in self.routes])
            return Subscription(self.name, self.handle, query=query)
        types = sorted({route.event_type for route in self.routes})
        return Subscription(self.name, self.handle, types=types)

    def handle(self, event: RecordedEvent) -> None:
        """Apply every route `event` matches, in their declared order."""
        with telemetry.handling(self.name, event, self.orchestrator.tenant):
            routed: Any = event
            if self.registry is not None:
                routed = TypedEvent.decoded(self.registry, event)
            for route in self.routes:
                if not route.takes(routed):
                    continue
                saga_id = route.saga_id(routed)
                name = route.saga.name
                if route.action == "start":
                    correlation = event.metadata.get("correlation_id") or str(event.id)
                    data = route.data(routed)
                    self.orchestrator.start(
                        route.saga,
                        data,
                        saga_id=saga_id,
                        correlation_id=str(correlation),
                        subject=route.subject(routed) if isinstance(data, BaseModel) else None,
                    )
                elif route.action == "signal":
                    signalled, typed = event, None
                    if routed is not event:  # the saga waits for the upcast data
                        signalled = replace(event, data=_as_json(routed.data))
                        typed = routed.data if isinstance(routed.data, BaseModel) else None
                    self.orchestrator.signal(name, saga_id, signalled, data=typed)
                else:
                    self.orchestrator.cancel(
                        name, saga_id, f"{event.type} at position {event.position}"
                    )
