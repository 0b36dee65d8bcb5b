"""OpenTelemetry for sagas: a span per step try in the trace that started the saga.

A saga's first event (`SagaStarted`) carries the `traceparent` of the context
it was started in: the command, or the event a process manager handled. Each
try of a step or of a compensation, whichever process runs it and however
late, is a span `saga {saga} {step}` whose parent is that context, so the
saga's work shows in the trace of what started it; its attributes name the
saga, instance, step, attempt, idempotency key, outcome, and the correlation
id as `messaging.message.conversation_id`. Nothing is recorded until the
application configures an OpenTelemetry SDK.

A failure is told by its type and where it was raised, never by its message,
which may quote the saga's data, personal fields included: the message is in
the saga's stream (sealed under its subject), and the spans and log records
point there (`store_telemetry.told`).
"""

from __future__ import annotations

import contextlib
import logging
import time
import weakref
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from eventcraft.eventstore import NewEvent, RecordedEvent
from eventcraft.eventstore import telemetry as store_telemetry
from eventcraft.projections import bare_traceback
from pydantic import BaseModel

from .context import StepContext
from .errors import StepTimedOut
from .index import SAGA_CATEGORY, SagaIndex
from .state import COMPENSATED, COMPLETED, FAILED, PARKED, RESOLVED, RETRIED, SagaState

if TYPE_CHECKING:
    from opentelemetry.metrics import CallbackOptions, Meter, Observation

SCOPE = "eventcraft.sagas"
SAGA = "eventcraft.saga.name"
SAGA_ID = "eventcraft.saga.id"
STEP = "eventcraft.saga.step"
OUTCOME = "eventcraft.saga.outcome"
COMPENSATING = "eventcraft.saga.compensating"
TENANT = store_telemetry.TENANT

KEPT = "the saga's stream (eventcraft sagas show)"
"""Where a step's or compensation's exception message is, as spans and logs say."""
HANDLED_KEPT = "the process manager's error store (eventcraft projections parked)"
PASS_KEPT = "the orchestrator's status (status().error) until a pass goes through"
"""Where the message of a failed pass of an orchestrator's loop is (not a step's)."""

log = logging.getLogger("eventcraft.sagas")

_TRANSITIONS = {
    FAILED: "failed",
    COMPLETED: "completed",
    COMPENSATED: "compensated",
    PARKED: "parked",
    RETRIED: "retried",
    RESOLVED: "resolved",
}
"""The transitions of a whole instance that are counted, as `eventcraft.saga.outcome`."""

_indexes: weakref.WeakSet[SagaIndex] = weakref.WeakSet()


class _Instruments:
    def __init__(self, meter: Meter) -> None:
        self.duration = meter.create_histogram(
            "eventcraft.saga.step.duration", "s", "Time a step's (or compensation's) try took"
        )
        self.tries = meter.create_counter(
            "eventcraft.saga.step.tries", "{try}", "Tries of steps and compensations, by outcome"
        )
        self.retries = meter.create_counter(
            "eventcraft.saga.step.retries", "{try}", "Tries after the first, of a step"
        )
        self.compensations = meter.create_counter(
            "eventcraft.saga.compensations", "{try}", "Tries of compensations"
        )
        self.transitions = meter.create_counter(
            "eventcraft.saga.transitions",
            "{saga}",
            "Instances that failed, completed, were compensated, parked, retried or resolved",
        )
        meter.create_observable_gauge(
            "eventcraft.saga.instances",
            [_instances],
            "{saga}",
            "Unfinished instances, by saga and status (active or parked), as last looked up",
        )


SCOPED = store_telemetry.Scoped(SCOPE, _Instruments)


def make_saga_gauges() -> None:
    """Make the sagas' observable gauges now, if a meter provider is set: a metrics
    endpoint calls it before its first scrape, as gauges first made during a scrape
    would wait for the lock the scrape holds.

    Example::

        from opentelemetry import metrics
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader

        from eventcraft.eventstore import EventStore
        from eventcraft.sagas import Orchestrator, Saga, Step, make_saga_gauges, wait_for

        reader = InMemoryMetricReader()  # a Prometheus reader, in a service
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
        make_saga_gauges()  # at start-up, before the first scrape

        def book(data, context): ...

        delivery = Saga("delivery", [Step("book", book), wait_for("pickup", "ParcelPickedUp")])
        store = EventStore.open("sqlite:///shop.db")
        orchestrator = Orchestrator(store, [delivery])
        orchestrator.start(delivery, {"parcel": 7}, saga_id="parcel-7")
        orchestrator.run_pending()  # it waits for the pickup: an active instance
        (instances,) = [
            metric
            for resource in reader.get_metrics_data().resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == "eventcraft.saga.instances"
        ]
        by_saga = {p.attributes["eventcraft.saga.name"]: p for p in instances.data.data_points}
        point = by_saga["delivery"]  # and one for each other saga this process runs
        assert (point.value, point.attributes["eventcraft.saga.status"]) == (1, "active")
        store.close()
    """
    SCOPED.instruments()


def watch(index: SagaIndex) -> None:
    """Report the instances `index` knows of in the `eventcraft.saga.instances` gauge."""
    _indexes.add(index)
    SCOPED.instruments()


def step_try(current: SagaState, context: StepContext) -> contextlib.AbstractContextManager[Any]:
    """The span and measurements of one try of a step or compensation, as a `with` block."""
    tracer = SCOPED.tracer()
    instruments = SCOPED.instruments()
    if tracer is None and instruments is None:
        return contextlib.nullcontext()
    return _step_try(tracer, instruments, current, context)


@contextlib.contextmanager
def _step_try(
    tracer: Any, instruments: _Instruments | None, current: SagaState, context: StepContext
) -> Iterator[None]:
    where: dict[str, Any] = {
        SAGA: current.name,
        STEP: context.step,
        COMPENSATING: context.compensating,
    }
    if context.tenant is not None:
        where[TENANT] = context.tenant
    started = time.perf_counter()
    outcome = "succeeded"
    span: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
    if tracer is not None:
        from opentelemetry.trace import SpanKind

        kind = "compensate" if context.compensating else "step"
        span = tracer.start_as_current_span(
            f"saga {current.name} {kind} {context.step}",
            context=origin(current),
            kind=SpanKind.INTERNAL,
            attributes=step_attributes(current, context),
            record_exception=False,
            set_status_on_exception=False,
        )
    with span as opened:
        try:
            yield
        except BaseException as error:
            outcome = "timed_out" if isinstance(error, StepTimedOut) else "failed"
            if opened is not None:
                store_telemetry.record_error(opened, error, KEPT)
            raise
        finally:
            if opened is not None and opened.is_recording():
                opened.set_attribute(OUTCOME, outcome)
            if instruments is not None:
                instruments.duration.record(time.perf_counter() - started, where)
                instruments.tries.add(1, {**where, OUTCOME: outcome})
                if context.compensating:
                    instruments.compensations.add(1, where)
                elif context.attempt > 1:
                    instruments.retries.add(1, where)


def handling(
    manager: str, event: RecordedEvent, tenant: str | None = None
) -> contextlib.AbstractContextManager[Any]:
    """A process manager's handling of `event` (of `tenant`'s store, if a tenant's), in
    the trace `event` was appended in.

    A CONSUMER span `handle {manager}`, child of the event's creation context
    (and linked to the batch it was delivered in), so that a saga it starts
    carries on the trace of the command that appended the event.
    """
    tracer = SCOPED.tracer()
    if tracer is None:
        return contextlib.nullcontext()
    return _handling(tracer, manager, event, tenant)


@contextlib.contextmanager
def _handling(
    tracer: Any, manager: str, event: RecordedEvent, tenant: str | None
) -> Iterator[None]:
    from opentelemetry import trace

    tenanted = {} if tenant is None else {TENANT: tenant}

    creation = store_telemetry.trace_context(event.metadata)
    batch = trace.get_current_span().get_span_context()
    with tracer.start_as_current_span(
        f"handle {manager}",
        context=None
        if creation is None
        else trace.set_span_in_context(trace.NonRecordingSpan(creation)),
        kind=trace.SpanKind.CONSUMER,
        links=[trace.Link(batch)] if batch.is_valid and creation is not None else [],
        attributes={
            "messaging.system": store_telemetry.SYSTEM,
            "messaging.operation.type": "process",
            "messaging.operation.name": "handle",
            "messaging.consumer.group.name": manager,
            "messaging.destination.name": event.stream_id,
            "messaging.message.id": str(event.id),
            "messaging.message.conversation_id": str(
                event.metadata.get("correlation_id") or event.id
            ),
            "eventcraft.position": event.position,
            **tenanted,
        },
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield
        except BaseException as error:
            # The subscription parks the event if it keeps failing: its message with it.
            store_telemetry.record_error(span, error, HANDLED_KEPT)
            raise


def step_attributes(current: SagaState, context: StepContext) -> dict[str, Any]:
    tenanted = {} if context.tenant is None else {TENANT: context.tenant}
    return {
        **tenanted,
        "messaging.system": store_telemetry.SYSTEM,
        "messaging.message.conversation_id": context.correlation_id,
        SAGA: current.name,
        SAGA_ID: context.saga_id,
        STEP: context.step,
        "eventcraft.saga.attempt": context.attempt,
        "eventcraft.saga.idempotency_key": context.idempotency_key,
        COMPENSATING: context.compensating,
    }


def origin(current: SagaState) -> Any:
    """The context the instance was started in, as a parent; None (the current one) if unknown."""
    if current.started_in is None:
        return None
    span_context = store_telemetry.trace_context(current.started_in)
    if span_context is None:
        return None
    from opentelemetry import trace

    return trace.set_span_in_context(trace.NonRecordingSpan(span_context))


def recorded(current: SagaState, events: Sequence[NewEvent], tenant: str | None = None) -> None:
    """Count the instance's transitions among `events` (in `tenant`'s store, if a
    tenant's) and log each with its ids."""
    for event in events:
        outcome = _TRANSITIONS.get(event.type)
        if outcome is None:
            continue
        instruments = SCOPED.instruments()
        if instruments is not None:
            where = {SAGA: current.name, OUTCOME: outcome}
            if tenant is not None:
                where[TENANT] = tenant
            instruments.transitions.add(1, where)
        log.info(
            "saga %s %s: %s",
            current.stream_id,
            outcome,
            _said(current, event),
            extra=log_fields(current),
        )


def _said(current: SagaState, event: NewEvent) -> str:
    """What a transition gives as its reason, for the log: the failed step and its error's
    type, never the error's message, which may quote personal data (the saga's stream
    keeps it, sealed under the saga's subject if it has one, `personal.sealed_text`);
    an operator's words (a cancel's, a resolve's) as given."""
    data = event.data
    if isinstance(data, BaseModel):
        # A record with sealed fields: only its plain parts, the clear ones.
        data = data.model_dump(include={"reason", "failure", "step", "bug", "note"})
    if not isinstance(data, dict):
        return ""
    failure = data.get("failure")
    if event.type == COMPENSATED and current.failed_with is not None:
        failure = {"step": current.failed_with.step, "error_type": current.failed_with.error_type}
    if isinstance(failure, dict):
        return f"step {failure.get('step')} failed: {failure.get('error_type')}"
    if event.type == PARKED:
        bug = data.get("bug")
        if isinstance(bug, dict):
            return f"step {data.get('step')} raised {bug.get('error_type')}"
        return f"its compensation of step {data.get('step')} failed"
    said = data.get("reason", data.get("note"))
    return "" if said is None else str(said)


def traced(error: BaseException) -> str:
    """A failed pass's `error` for its log record: `told`, then its traceback of frames and
    types (`bare_traceback`), as `log.exception` would show it but for the messages."""
    return f"{store_telemetry.told(error, PASS_KEPT)}\n{bare_traceback(error).rstrip()}"


def log_fields(current: SagaState) -> dict[str, Any]:
    """The structured fields of a log record about the instance `current`."""
    return {
        "saga": current.name,
        "saga_id": current.saga_id,
        "stream_id": current.stream_id,
        "correlation_id": current.correlation_id,
    }


def _instances(options: CallbackOptions) -> Iterable[Observation]:
    from opentelemetry.metrics import Observation

    # Orchestrators of one store in one process share their instances: each counted once.
    # Two tenants' stores may each hold a stream of one name: told apart by their tenant.
    by_status: dict[str, set[tuple[str, str]]] = {"active": set(), "parked": set()}
    for index in list(_indexes):
        tenant = getattr(index.store, "tenant", None) or ""
        for status, streams in (("active", index.active), ("parked", index.parked)):
            try:
                by_status[status].update((tenant, stream) for stream in list(streams))
            except RuntimeError:  # changed by its orchestrator meanwhile: next time
                continue
    counts: Counter[tuple[str, str, str]] = Counter()
    for status, pairs in by_status.items():
        for tenant, stream in pairs:
            name = stream.removeprefix(f"{SAGA_CATEGORY}-").partition(":")[0]
            counts[tenant, name, status] += 1
    return [
        Observation(
            count,
            {SAGA: name, "eventcraft.saga.status": status, **({TENANT: tenant} if tenant else {})},
        )
        for (tenant, name, status), count in sorted(counts.items())
    ]
