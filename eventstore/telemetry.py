"""OpenTelemetry for the store: a PRODUCER span per append, its context in each event, metrics.

Depends on `opentelemetry-api` only (the `otel` extra), imported if installed.
Nothing is recorded until the application configures an SDK (sets a tracer or
meter provider): before that, and without the API, an append pays one global
lookup. `EventStore` and `AsyncEventStore` call the same functions here, so the
two faces name their spans, attributes and metrics alike.

An append is a span `publish {category}` of kind PRODUCER, following the
OpenTelemetry semantic conventions for messaging, and each appended event
carries that span's W3C context as `traceparent` in its metadata (unless the
caller set one: an import keeps the trace an event was first written in).
Consumers (projections, sagas) link their spans to it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import replace
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .errors import AppendOutcomeUnknown, WrongExpectedVersion
from .events import AppendResult, ExpectedVersion, NewEvent, StreamState

try:
    from opentelemetry import metrics as otel_metrics
    from opentelemetry import trace as otel_trace
    from opentelemetry.metrics import _internal as metrics_globals
except ImportError:  # the `otel` extra is not installed: nothing to report to
    otel_metrics = None  # type: ignore[assignment]
    otel_trace = None  # type: ignore[assignment]
    metrics_globals = None  # type: ignore[assignment]

# A provider named by environment variable is made on first use by the API's getters;
# without one, the API's own globals say at once whether a provider was set, sparing
# each append the getters' environment lookups (a microsecond each).
_TRACER_FROM_ENV = "OTEL_PYTHON_TRACER_PROVIDER" in os.environ
_METER_FROM_ENV = "OTEL_PYTHON_METER_PROVIDER" in os.environ

if TYPE_CHECKING:
    from opentelemetry.metrics import Counter, Histogram, Meter, MeterProvider
    from opentelemetry.metrics import _Gauge as Gauge  # the synchronous gauge (API 1.23+)
    from opentelemetry.trace import Span, Tracer, TracerProvider

SCOPE = "eventcraft.eventstore"
"""The instrumentation scope (tracer and meter name) of the store's spans and metrics.

Example::

    from eventcraft.eventstore import EventStore, NewEvent
    from eventcraft.eventstore.telemetry import SCOPE
    from opentelemetry import metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.metrics.view import DropAggregation, View

    # The application's SDK, set once, with a view that drops the store's count of reads.
    reads = View(
        meter_name=SCOPE,
        instrument_name="eventcraft.store.reads",
        aggregation=DropAggregation(),
    )
    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader], views=[reads]))
    with EventStore.open("sqlite:///shop.db") as store:
        store.append("order-1", [NewEvent("Placed", {})])
        list(store.read_stream("order-1"))
    scopes = [s for r in reader.get_metrics_data().resource_metrics for s in r.scope_metrics]
    kept = {m.name for s in scopes if s.scope.name == SCOPE for m in s.metrics}
    assert "eventcraft.store.appends" in kept and "eventcraft.store.reads" not in kept
"""
SYSTEM = "eventcraft"
"""`messaging.system` on every span of eventcraft.

Example::

    from eventcraft.eventstore import EventStore, NewEvent
    from eventcraft.eventstore.telemetry import SYSTEM
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()  # the application's SDK, set once
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    with EventStore.open("sqlite:///shop.db") as store:
        store.append("order-1", [NewEvent("Placed", {})])
    spans = exporter.get_finished_spans()
    ours = [s for s in spans if s.attributes.get("messaging.system") == SYSTEM]
    assert [(s.name, s.attributes["messaging.destination.name"]) for s in ours] == [
        ("publish order", "order-1")
    ]
"""
TRACEPARENT = "traceparent"
"""The metadata key holding the W3C trace context an event was appended in.

Example::

    from eventcraft.eventstore import EventStore, NewEvent
    from eventcraft.eventstore.telemetry import TRACEPARENT
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    trace.set_tracer_provider(TracerProvider())  # the application's SDK, set once
    with EventStore.open("sqlite:///shop.db") as store:
        with trace.get_tracer("shop").start_as_current_span("POST /orders") as request:
            store.append("order-1", [NewEvent("Placed", {})])
        (event,) = store.read_stream("order-1")
    # The append's span, a child of the request's: the same trace.
    _, trace_id, _, _ = event.metadata[TRACEPARENT].split("-")
    assert int(trace_id, 16) == request.get_span_context().trace_id
"""
TRACESTATE = "tracestate"
"""The metadata key of the W3C `tracestate` that goes with it, when there is one.

Example::

    from eventcraft.eventstore import EventStore, NewEvent
    from eventcraft.eventstore.telemetry import TRACESTATE
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    trace.set_tracer_provider(TracerProvider())  # the application's SDK, set once
    headers = {  # a request's, from a caller whose tracing vendor keeps state
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "tracestate": "congo=t61rcWkgMzE",
    }
    caller = TraceContextTextMapPropagator().extract(headers)
    with EventStore.open("sqlite:///shop.db") as store:
        with trace.get_tracer("shop").start_as_current_span("POST /orders", context=caller):
            store.append("order-1", [NewEvent("Placed", {})])
        (event,) = store.read_stream("order-1")
    assert event.metadata[TRACESTATE] == "congo=t61rcWkgMzE"
"""

# Attribute names beyond the semantic conventions' own, all under `eventcraft.`.
FIRST_POSITION = "eventcraft.position.first"
LAST_POSITION = "eventcraft.position.last"
EXPECTED_VERSION = "eventcraft.expected_version"
STREAM_VERSION = "eventcraft.stream.version"
OUTCOME = "eventcraft.outcome"
TENANT = "eventcraft.tenant"
"""The attribute naming the tenant on the spans and metrics of a tenant's store, and of
the projections and sagas kept in it: a dashboard's per-tenant view.

Example::

    from eventcraft.eventstore import NewEvent, Tenants
    from eventcraft.eventstore.telemetry import TENANT
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()  # the application's SDK, set once
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    with Tenants("sqlite:///tenant-{tenant}.db") as tenants:
        tenants.for_tenant("acme").append("order-1", [NewEvent("Placed", {})])
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "publish order"]
    assert span.attributes[TENANT] == "acme"
"""


def tracer_provider() -> TracerProvider | None:
    """The application's tracer provider, or None when none is configured (or no API)."""
    if otel_trace is None:
        return None
    if not _TRACER_FROM_ENV and getattr(otel_trace, "_TRACER_PROVIDER", True) is None:
        return None
    provider = otel_trace.get_tracer_provider()
    quiet = (otel_trace.ProxyTracerProvider, otel_trace.NoOpTracerProvider)
    return None if isinstance(provider, quiet) else provider


def meter_provider() -> MeterProvider | None:
    """The application's meter provider, or None when none is configured (or no API)."""
    if otel_metrics is None:
        return None
    if not _METER_FROM_ENV and getattr(metrics_globals, "_METER_PROVIDER", True) is None:
        return None
    provider = otel_metrics.get_meter_provider()
    # The API's default is a proxy (a private class) that records nothing until a
    # provider is set.
    if type(provider).__name__ == "_ProxyMeterProvider":
        return None
    return None if isinstance(provider, otel_metrics.NoOpMeterProvider) else provider


class Scoped:
    """A tracer and a meter of one scope, taken again when the application's providers change.

    Instruments are built by `build(meter)` once per meter provider; each
    package keeps one of these for its own scope.
    """

    def __init__(self, scope: str, build: Any) -> None:
        self.scope = scope
        self._build = build
        self._tracer_of: tuple[object, Tracer] | None = None
        self._meter_of: tuple[object, Any] | None = None

    def tracer(self) -> Tracer | None:
        provider = tracer_provider()
        if provider is None:
            return None
        held = self._tracer_of
        if held is None or held[0] is not provider:
            held = self._tracer_of = (provider, provider.get_tracer(self.scope))
        return held[1]

    def instruments(self) -> Any:
        """What `build` made of this scope's meter, or None while no meter provider is set."""
        provider = meter_provider()
        if provider is None:
            return None
        held = self._meter_of
        if held is None or held[0] is not provider:
            held = self._meter_of = (provider, self._build(provider.get_meter(self.scope)))
        return held[1]


class _Instruments:
    def __init__(self, meter: Meter) -> None:
        self.appends: Counter = meter.create_counter(
            "eventcraft.store.appends", "{append}", "Appends, by category and outcome"
        )
        self.events: Counter = meter.create_counter(
            "eventcraft.store.appended_events", "{event}", "Events written by appends"
        )
        self.duration: Histogram = meter.create_histogram(
            "eventcraft.store.append.duration", "s", "Time an append took, answer included"
        )
        self.conflicts: Counter = meter.create_counter(
            "eventcraft.store.version_conflicts",
            "{append}",
            "Appends refused because the stream was not at the expected version",
        )
        self.unknown: Counter = meter.create_counter(
            "eventcraft.store.unknown_outcomes",
            "{append}",
            "Appends whose outcome the store could not learn (safe to retry)",
        )
        self.reads: Counter = meter.create_counter(
            "eventcraft.store.reads", "{read}", "Reads of a stream or of the log, by kind"
        )
        self.replica_lag: Gauge = meter.create_gauge(
            "eventcraft.store.replica.lag",
            "{event}",
            "Positions a store's read replica is behind its primary's high-water mark, "
            "as last measured (by log_status, or a read that asked the primary)",
        )
        self.replica_lag_bytes: Gauge = meter.create_gauge(
            "eventcraft.store.replica.lag.bytes",
            "By",
            "WAL a store's read replica has not replayed, as log_status last measured it",
        )


SCOPED = Scoped(SCOPE, _Instruments)


def count_read(kind: str, tenant: str | None = None) -> None:
    """Count one read of `kind` (`stream`, `stream_encoded`, `all`, `all_encoded`), of
    `tenant`'s store if a tenant's."""
    instruments = SCOPED.instruments()
    if instruments is not None:
        where = {"eventcraft.read.kind": kind}
        if tenant is not None:
            where[TENANT] = tenant
        instruments.reads.add(1, where)


def replica_lag(replica: str, events: int, wal_bytes: int | None = None) -> None:
    """Record how far the read replica `replica` (its host and port) is behind."""
    instruments = SCOPED.instruments()
    if instruments is not None:
        where = {"eventcraft.replica": replica}
        instruments.replica_lag.set(events, where)
        if wal_bytes is not None:
            instruments.replica_lag_bytes.set(wal_bytes, where)


def expected_text(expected: ExpectedVersion) -> str:
    return expected.value if isinstance(expected, StreamState) else str(expected)


def appending(
    stream_id: str,
    events: Sequence[NewEvent],
    expected: ExpectedVersion,
    tenant: str | None = None,
) -> Append | None:
    """The telemetry of one append (to `tenant`'s store, if a tenant's), or None when
    nothing is configured to record it.

    Used as `with` around the append (sync or async alike): pass `.events` on
    to the store (they carry the span's context) and the result to `.done`.
    """
    tracer = SCOPED.tracer()
    instruments = SCOPED.instruments()
    if tracer is None and instruments is None:
        return None
    return Append(tracer, instruments, stream_id, events, expected, tenant)


class Append:
    """The span and measurements of one append (see `appending`)."""

    def __init__(
        self,
        tracer: Tracer | None,
        instruments: _Instruments | None,
        stream_id: str,
        events: Sequence[NewEvent],
        expected: ExpectedVersion,
        tenant: str | None = None,
    ) -> None:
        self.events = events
        self._instruments = instruments
        self._category = stream_id.split("-", 1)[0] if isinstance(stream_id, str) else "?"
        self._where = {"messaging.destination.template": self._category}
        """The metrics' attributes: the category, and the tenant of a tenant's store."""
        if tenant is not None:
            self._where[TENANT] = tenant
        self._span: Span | None = None
        self._token: object = None
        self._started = 0.0
        if tracer is not None:
            self._span = tracer.start_span(
                f"publish {self._category}",
                kind=otel_trace.SpanKind.PRODUCER,
                attributes=publish_attributes(stream_id, events, expected, tenant),
            )
            self.events = carrying(events, self._span)

    def __enter__(self) -> Append:
        if self._span is not None:
            from opentelemetry import context

            self._token = context.attach(otel_trace.set_span_in_context(self._span))
        self._started = time.perf_counter()
        return self

    def done(self, result: AppendResult) -> AppendResult:
        """Note what the append did; returns `result`."""
        span = self._span
        if span is not None and span.is_recording():
            span.set_attribute(STREAM_VERSION, result.version)
            if result.positions:
                span.set_attribute(FIRST_POSITION, result.positions[0])
                span.set_attribute(LAST_POSITION, result.positions[-1])
        if self._instruments is not None:
            self._instruments.events.add(len(result.positions), self._where)
        return result

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        outcome = "ok" if exc is None else outcome_of(exc)
        instruments = self._instruments
        if instruments is not None:
            where = self._where
            instruments.duration.record(time.perf_counter() - self._started, where)
            instruments.appends.add(1, {**where, OUTCOME: outcome})
            if outcome == "conflict":
                instruments.conflicts.add(1, where)
            elif outcome == "unknown":
                instruments.unknown.add(1, where)
        span = self._span
        if span is None:
            return
        if exc is not None:
            record_error(span, exc)
        if self._token is not None:
            from opentelemetry import context

            context.detach(self._token)  # type: ignore[arg-type]
        span.end()


def publish_attributes(
    stream_id: object, events: object, expected: ExpectedVersion, tenant: str | None = None
) -> dict[str, Any]:
    """The PRODUCER span's attributes, from the append's arguments as given."""
    attributes: dict[str, Any] = {
        "messaging.system": SYSTEM,
        "messaging.operation.type": "publish",
        "messaging.operation.name": "append",
    }
    if tenant is not None:
        attributes[TENANT] = tenant
    if isinstance(stream_id, str):
        attributes["messaging.destination.name"] = stream_id
        attributes["messaging.destination.template"] = stream_id.split("-", 1)[0]
    if isinstance(expected, int | StreamState):
        attributes[EXPECTED_VERSION] = expected_text(expected)
    if isinstance(events, Sequence):
        if len(events) == 1 and isinstance(events[0], NewEvent):
            attributes["messaging.message.id"] = str(events[0].id)
        else:
            attributes["messaging.batch.message_count"] = len(events)
    return attributes


def carrying(events: Sequence[NewEvent], span: Span) -> Sequence[NewEvent]:
    """`events`, each with `span`'s W3C context in its metadata (where the caller set none).

    Anything that is not a well-formed batch is passed on as it is, for the
    store's checks to refuse with their own message.
    """
    context = span.get_span_context()
    if not context.is_valid or not isinstance(events, Sequence):
        return events
    traceparent = (
        f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"
    )
    state = context.trace_state.to_header() if context.trace_state else ""
    carried: list[NewEvent] = []
    for event in events:
        if not isinstance(event, NewEvent) or not isinstance(event.metadata, dict):
            return events
        if TRACEPARENT in event.metadata:
            carried.append(event)
            continue
        metadata = {**event.metadata, TRACEPARENT: traceparent}
        if state:
            metadata[TRACESTATE] = state
        carried.append(replace(event, metadata=metadata))
    return carried


def outcome_of(error: BaseException) -> str:
    """How an append that raised `error` ended, as the `eventcraft.outcome` attribute says it."""
    if isinstance(error, WrongExpectedVersion):
        return "conflict"
    if isinstance(error, AppendOutcomeUnknown):
        return "unknown"
    return "error"


# --- an exception, as logs and traces tell it -------------------------------------
#
# An exception's message often quotes the data that failed, personal fields included
# (opened by the read that handed the event over). Logs and traces are copied to
# places no forget reaches, so they say what failed (its type, where it was raised,
# the ids of what it failed on) and where the message is kept: an error store, which
# a forget erases, a saga's stream, where it is sealed, or the caller's exception.

RAISED = "the exception raised to the caller"
"""Where the message of an error that no store keeps is: its caller got it."""


def raised_at(error: BaseException) -> str:
    """Where `error` was raised, as `function at file:line` of its innermost frame; `""`
    if it was never raised. A frame says where the program was, not what it held."""
    frame = error.__traceback__
    if frame is None:
        return ""
    while frame.tb_next is not None:
        frame = frame.tb_next
    code = frame.tb_frame.f_code
    return f"{code.co_name} at {os.path.basename(code.co_filename)}:{frame.tb_lineno}"


def exception_type(error: BaseException) -> str:
    """`error`'s type as the OpenTelemetry SDK's `record_exception` names it in
    `exception.type`: module-qualified, but for builtins."""
    kind = type(error)
    module = kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"


def withheld(kept: str) -> str:
    """The text in place of an exception's message in a trace: where the message is."""
    return f"withheld, as it may quote personal data: it is in {kept}"


def told(error: BaseException, kept: str = RAISED) -> str:
    """`error` as a log record or a span's status tells it: its type and where it was
    raised, and where its message is kept (`kept`); never the message itself."""
    where = raised_at(error)
    raised = f" raised in {where}" if where else ""
    return f"{type(error).__name__}{raised}; its message is in {kept}"


def record_error(span: Span, error: BaseException, kept: str = RAISED) -> None:
    """Mark `span` failed with `error`: `error.type`, an `exception` event and an ERROR
    status, following the semantic conventions but for the message, which may quote
    personal data: `exception.message` says where it is kept (`kept`) instead, and the
    status says `told(error, kept)`. Not `span.record_exception`, which writes the
    message and a traceback ending in it."""
    if not span.is_recording():
        return
    span.set_attribute("error.type", type(error).__qualname__)
    span.add_event(
        "exception",
        {"exception.type": exception_type(error), "exception.message": withheld(kept)},
    )
    span.set_status(otel_trace.StatusCode.ERROR, told(error, kept))


def current_span() -> Span | None:
    """The span current in this context (a non-recording one if none), or None without the API."""
    if otel_trace is None:
        return None
    return otel_trace.get_current_span()


def trace_context(metadata: dict[str, Any]) -> Any:
    """The `SpanContext` an event was appended in, from its metadata; None if it has none.

    For consumers to link their spans to the events' creation contexts.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.eventstore.telemetry import trace_context
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider

        trace.set_tracer_provider(TracerProvider())  # the application's SDK, set once
        with EventStore.open("sqlite:///shop.db") as store:
            store.append("order-1", [NewEvent("Placed", {})])
            (event,) = store.read_stream("order-1")
        # A consumer's span, linked to where the event was appended (a trace of its own).
        appended = trace_context(event.metadata)
        with trace.get_tracer("billing").start_as_current_span(
            "bill order-1", links=[trace.Link(appended)]
        ) as billing:
            pass
        assert billing.links[0].context.span_id == appended.span_id
        assert trace_context({}) is None  # an event appended with no SDK set
    """
    if otel_trace is None:
        return None
    header = metadata.get(TRACEPARENT)
    if not isinstance(header, str):
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier = {TRACEPARENT: header}
    state = metadata.get(TRACESTATE)
    if isinstance(state, str):
        carrier[TRACESTATE] = state
    extracted = TraceContextTextMapPropagator().extract(carrier)
    context = otel_trace.get_current_span(extracted).get_span_context()
    return context if context.is_valid else None


__all__ = [
    "SCOPE",
    "SYSTEM",
    "TRACEPARENT",
    "TRACESTATE",
    "trace_context",
]
