"""OpenTelemetry for projections: a CONSUMER span per batch, lag gauges, parked events.

A batch applied (or delivered, for a subscription) is a span `process {projection}`
of kind CONSUMER, linked to the creation context each of its events carries
(the `traceparent` the store wrote when it was appended), so a trace of the
command that appended an event leads to the batches that applied it. A
handler's failure and a parked event are events on that span. Nothing is
recorded until the application configures an OpenTelemetry SDK; without the
`otel` extra this module costs a global lookup per batch.

A handler's exception is told by its type and where it was raised, never by its
message, which may quote the event's data, personal fields included: the message
is kept in the error store, where a forget erases it (`parking.py`), and the log
record and span events point there (`store_telemetry.told`).
"""

from __future__ import annotations

import contextlib
import logging
import time
import weakref
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from eventcraft.eventstore import RecordedEvent
from eventcraft.eventstore import telemetry as store_telemetry

from .errors import ProjectionStopped
from .status import LAG_COUNTED
from .tracebacks import bare_traceback

if TYPE_CHECKING:
    from opentelemetry.metrics import CallbackOptions, Meter, Observation

    from .runner import ProjectionRunner
    from .tenants_runner import TenantsRunner

SCOPE = "eventcraft.projections"
MOST_LINKS = 100
"""Links on one batch span at most (the SDK keeps 128): one per distinct creation context."""

GROUP = "messaging.consumer.group.name"
TENANT = store_telemetry.TENANT

PARKED_IN = "the projection's error store (eventcraft projections parked)"
"""Where a parked event's exception message is kept, as logs and traces say."""
FAILED_IN = "the projection's error store if the event is parked"
RETRIED_IN = "the exception the runner's catch_up() raises"
"""Where the message of a runner's own failure (not a handler's) is: it tries again."""

log = logging.getLogger("eventcraft.projections")

_runners: weakref.WeakSet[ProjectionRunner] = weakref.WeakSet()
_tenants_runners: weakref.WeakSet[TenantsRunner] = weakref.WeakSet()


class _Instruments:
    def __init__(self, meter: Meter) -> None:
        self.batches = meter.create_counter(
            "eventcraft.projection.batches", "{batch}", "Batches applied, per projection"
        )
        self.events = meter.create_counter(
            "eventcraft.projection.events", "{event}", "Events applied, per projection"
        )
        self.duration = meter.create_histogram(
            "eventcraft.projection.batch.duration", "s", "Time a batch took to apply"
        )
        self.failures = meter.create_counter(
            "eventcraft.projection.failures", "{failure}", "Handler failures (each try counts)"
        )
        self.parked = meter.create_counter(
            "eventcraft.projection.events_parked", "{event}", "Events parked in the error store"
        )
        meter.create_observable_gauge(
            "eventcraft.projection.lag",
            [_lag_events],
            "{event}",
            f"Events after a projection's checkpoint it would apply, at most {LAG_COUNTED}",
        )
        meter.create_observable_gauge(
            "eventcraft.projection.lag.duration",
            [_lag_seconds],
            "s",
            "Age of the oldest event a projection reads and has not applied; 0 when current",
        )
        meter.create_observable_gauge(
            "eventcraft.projection.parked",
            [_parked_now],
            "{event}",
            "Events waiting in a projection's error store",
        )


SCOPED = store_telemetry.Scoped(SCOPE, _Instruments)


def make_projection_gauges() -> None:
    """Make the projections' observable gauges now, if a meter provider is set: a metrics
    endpoint calls it before its first scrape, as gauges first made during a scrape
    would wait for the lock the scrape holds.

    Example::

        from opentelemetry import metrics
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from eventcraft.eventstore import EventStore
        from eventcraft.projections import ProjectionRunner, Subscription, make_projection_gauges

        reader = InMemoryMetricReader()  # a metrics endpoint's, e.g. Prometheus'
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
        make_projection_gauges()  # before the first scrape, not during it
        with EventStore.open("memory://") as store:
            with ProjectionRunner(store, [Subscription("receipts", lambda event: None)]):
                scraped = reader.get_metrics_data()
        names = {metric.name for resource in scraped.resource_metrics
                 for scope in resource.scope_metrics for metric in scope.metrics}
        assert {"eventcraft.projection.lag", "eventcraft.projection.parked"} <= names
    """
    SCOPED.instruments()


def watch(runner: ProjectionRunner) -> None:
    """Report `runner`'s projections' lag and error stores in the observable gauges."""
    _runners.add(runner)
    SCOPED.instruments()  # the gauges exist from now on, if a meter provider is set


def unwatch(runner: ProjectionRunner) -> None:
    _runners.discard(runner)


def watch_tenants(runner: TenantsRunner) -> None:
    """Report a many-tenant runner's lag per tenant in the lag gauge."""
    _tenants_runners.add(runner)
    SCOPED.instruments()


def unwatch_tenants(runner: TenantsRunner) -> None:
    _tenants_runners.discard(runner)


def named(name: str, tenant: str | None) -> dict[str, Any]:
    """A projection's attributes: its name, and its tenant's when its store is a tenant's."""
    return {GROUP: name} if tenant is None else {GROUP: name, TENANT: tenant}


def processing(
    name: str, events: Sequence[RecordedEvent], tenant: str | None = None
) -> contextlib.AbstractContextManager[Any]:
    """The span and measurements of one batch of projection `name` (of `tenant`'s store,
    if a tenant's), as a `with` block."""
    tracer = SCOPED.tracer()
    instruments = SCOPED.instruments()
    if (tracer is None and instruments is None) or not events:
        return contextlib.nullcontext()
    return _processing(tracer, instruments, name, events, tenant)


@contextlib.contextmanager
def _processing(
    tracer: Any,
    instruments: _Instruments | None,
    name: str,
    events: Sequence[RecordedEvent],
    tenant: str | None,
) -> Iterator[None]:
    where = named(name, tenant)
    started = time.perf_counter()
    span: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
    if tracer is not None:
        from opentelemetry.trace import Link, SpanKind

        span = tracer.start_as_current_span(
            f"process {name}",
            kind=SpanKind.CONSUMER,
            attributes={**batch_attributes(name, events), **where},
            links=[Link(c) for c in creation_contexts(events)],
            record_exception=False,
            set_status_on_exception=False,
        )
    with span as current:
        try:
            yield
        except BaseException as error:
            if current is not None:
                kept = PARKED_IN if isinstance(error, ProjectionStopped) else store_telemetry.RAISED
                store_telemetry.record_error(current, error, kept)
            raise
        finally:
            if instruments is not None:
                instruments.duration.record(time.perf_counter() - started, where)
    if instruments is not None:
        instruments.batches.add(1, where)
        instruments.events.add(len(events), where)


class SparkRun:
    """What a Spark run tells its span once it is done."""

    def __init__(self, span: Any) -> None:
        self.span = span

    def finished(self, **facts: object) -> None:
        """Set `eventcraft.spark.<fact>` on the run's span (nothing without an SDK)."""
        if self.span is not None:
            for fact, value in facts.items():
                self.span.set_attribute(f"eventcraft.spark.{fact}", value)


@contextlib.contextmanager
def spark_run(operation: str, subject: str) -> Iterator[SparkRun]:
    """A span `{operation} {subject}` around one Spark replay or archive export.

    One span per run, not per task: the work happens in executors, often on
    other machines, whose spans would need an SDK of their own there.
    """
    tracer = SCOPED.tracer()
    if tracer is None:
        yield SparkRun(None)
        return
    attributes = {"eventcraft.spark.operation": operation, "eventcraft.spark.subject": subject}
    with tracer.start_as_current_span(
        f"{operation} {subject}",
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            yield SparkRun(span)
        except BaseException as error:
            store_telemetry.record_error(span, error)
            raise


def batch_attributes(name: str, events: Sequence[RecordedEvent]) -> dict[str, Any]:
    return {
        "messaging.system": store_telemetry.SYSTEM,
        "messaging.operation.type": "process",
        "messaging.operation.name": "apply",
        GROUP: name,
        "messaging.batch.message_count": len(events),
        store_telemetry.FIRST_POSITION: events[0].position,
        store_telemetry.LAST_POSITION: events[-1].position,
    }


def creation_contexts(events: Iterable[RecordedEvent]) -> list[Any]:
    """The distinct contexts `events` were appended in, at most `MOST_LINKS`."""
    seen: dict[tuple[int, int], Any] = {}
    for event in events:
        context = store_telemetry.trace_context(event.metadata)
        if context is not None:
            seen.setdefault((context.trace_id, context.span_id), context)
            if len(seen) == MOST_LINKS:
                break
    return list(seen.values())


def handler_failed(
    name: str, event: RecordedEvent | None, error: BaseException, tenant: str | None = None
) -> None:
    """A handler raised: an event on the current batch span, a failure counted."""
    instruments = SCOPED.instruments()
    if instruments is not None:
        failed = {**named(name, tenant), "error.type": type(error).__qualname__}
        instruments.failures.add(1, failed)
    span = store_telemetry.current_span()
    if span is not None and span.is_recording():
        span.add_event("handler failed", _about(event, error, FAILED_IN))


def parked(
    name: str, event: RecordedEvent, error: BaseException, stops: bool, tenant: str | None = None
) -> None:
    """`event` is parked after its last try: noted on the batch span, counted and logged."""
    instruments = SCOPED.instruments()
    if instruments is not None:
        instruments.parked.add(1, named(name, tenant))
    span = store_telemetry.current_span()
    if span is not None and span.is_recording():
        about = _about(event, error, PARKED_IN)
        span.add_event("parked", {**about, "eventcraft.projection.stopped": stops})
    log.warning(
        "projection %r parked the event at %s (%s v%s, %s): %s",
        name,
        event.position,
        event.stream_id,
        event.version,
        event.type,
        store_telemetry.told(error, PARKED_IN),
        extra={
            "projection": name,
            "position": event.position,
            "stream_id": event.stream_id,
            "correlation_id": event.metadata.get("correlation_id"),
        },
    )


def stopped(error: ProjectionStopped) -> None:
    """Log that a projection stopped on the event parked at `error.position`."""
    log.error(
        "projection %r stopped at position %s: %s",
        error.name,
        error.position,
        store_telemetry.told(error.error, PARKED_IN),
        extra={"projection": error.name, "position": error.position},
    )


def traced(error: BaseException, kept: str = RETRIED_IN) -> str:
    """`error` for a log record of a failure no handler caused: `told`, then its
    traceback of frames and types (`bare_traceback`), as `log.exception` would show it
    but for the messages."""
    return f"{store_telemetry.told(error, kept)}\n{bare_traceback(error).rstrip()}"


def _about(event: RecordedEvent | None, error: BaseException, kept: str) -> dict[str, Any]:
    about: dict[str, Any] = {
        "error.type": type(error).__qualname__,
        "exception.type": store_telemetry.exception_type(error),
        "exception.message": store_telemetry.withheld(kept),
    }
    if event is not None:
        about["eventcraft.position"] = event.position
        about["messaging.destination.name"] = event.stream_id
        about["messaging.message.id"] = str(event.id)
    return about


# --- the observable gauges: read when the meter provider collects ------------------


def _statuses() -> Iterator[tuple[Any, dict[str, Any]]]:
    """Each watched runner's projections' statuses, with their attributes."""
    for runner in list(_runners):
        try:
            tenant = getattr(runner.store, "tenant", None)
            for found in runner.status():
                yield found, named(found.name, tenant)
        except Exception as error:  # a collection must not fail for one database
            log.warning("no projection status for the lag gauges: %s", error)


def _lag_events(options: CallbackOptions) -> Iterable[Observation]:
    from opentelemetry.metrics import Observation

    found = [Observation(s.lag_events, where) for s, where in _statuses()]
    # A many-tenant runner's, as its last turn of each tenant saw it: a scrape opens no
    # tenant's store.
    for runner in list(_tenants_runners):
        for (tenant, name), lag in runner.lags().items():
            found.append(Observation(lag, named(name, tenant)))
    return found


def _lag_seconds(options: CallbackOptions) -> Iterable[Observation]:
    from opentelemetry.metrics import Observation

    return [Observation(s.lag_seconds, where) for s, where in _statuses()]


def _parked_now(options: CallbackOptions) -> Iterable[Observation]:
    from opentelemetry.metrics import Observation

    return [Observation(s.parked, where) for s, where in _statuses()]
