"""What an action or compensation is told about the call it serves."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .failures import StepFailure


@dataclass(frozen=True)
class StepContext:
    """What an action or compensation is told about the call it serves.

    Example::

        from eventcraft.eventstore import EventStore
        from eventcraft.sagas import Orchestrator, Saga, Step, StepContext

        told: list[StepContext] = []

        def reserve(data, context):
            told.append(context)
            return {"reservation": context.idempotency_key}  # the warehouse applies it once

        def ship(data, context):
            told.append(context)

        fulfilment = Saga("fulfilment", [Step("reserve", reserve), Step("ship", ship)])
        store = EventStore.open("sqlite:///shop.db")
        orchestrator = Orchestrator(store, [fulfilment])
        orchestrator.start(fulfilment, {"sku": "tea"}, saga_id="order-1")
        orchestrator.run_pending()
        reserving, shipping = told
        assert (reserving.saga_id, reserving.step, reserving.attempt) == ("order-1", "reserve", 1)
        assert shipping.results == {"reserve": {"reservation": "saga-fulfilment:order-1/reserve"}}
        assert shipping.correlation_id == "order-1" and not shipping.compensating
        store.close()
    """

    saga_id: str
    step: str
    attempt: int
    """1 for the first try; a try after a crash or a failure counts up."""
    idempotency_key: str
    """The same for every try of this step's action (or compensation): a service
    that honours it applies the step once, however often it is retried."""
    correlation_id: str
    """The saga instance's conversation id, for the services' own events."""
    results: Mapping[str, Any]
    """Results of the steps that succeeded so far, by step name."""
    compensating: bool = False
    """Whether this call is a compensation."""
    failure: StepFailure | None = None
    """To a compensation: why the saga failed (the step, the exception's type, its
    message). None when no step failed: the saga was cancelled, or an operator ordered
    its compensation (`compensate`); the saga's `failure` then says by whom and why."""
    tenant: str | None = None
    """The tenant whose store the saga is in (its orchestrator's store is a tenant's), or
    None. The idempotency key is unique within one store: a service that serves several
    tenants keys what it did by both, `(context.tenant, context.idempotency_key)`."""
