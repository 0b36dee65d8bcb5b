"""An append is a PRODUCER span whose context each appended event carries."""

from __future__ import annotations

import asyncio

import pytest
from eventcraft.eventstore import (
    NO_STREAM,
    AsyncEventStore,
    EventStore,
    InvalidEvent,
    NewEvent,
    WrongExpectedVersion,
)
from eventcraft.eventstore.telemetry import TRACEPARENT, trace_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode

from .conftest import Telemetry


def test_an_append_is_a_producer_span_whose_context_each_event_carries(
    telemetry: Telemetry, store_url: str
) -> None:
    tracer = trace.get_tracer("test")
    with EventStore.open(store_url) as store, tracer.start_as_current_span("command") as command:
        result = store.append(
            "order-1", [NewEvent("Placed", {"n": 1}), NewEvent("Paid", {"n": 2})], NO_STREAM
        )
        stored = list(store.read_stream("order-1"))
    (span,) = telemetry.finished("publish order")
    assert span.kind is SpanKind.PRODUCER
    assert span.parent is not None and span.parent.span_id == command.get_span_context().span_id
    assert dict(span.attributes or {}) == {
        "messaging.system": "eventcraft",
        "messaging.operation.type": "publish",
        "messaging.operation.name": "append",
        "messaging.destination.name": "order-1",
        "messaging.destination.template": "order",
        "messaging.batch.message_count": 2,
        "eventcraft.expected_version": "no_stream",
        "eventcraft.stream.version": 2,
        "eventcraft.position.first": result.positions[0],
        "eventcraft.position.last": result.positions[-1],
    }
    for event in stored:
        carried = trace_context(event.metadata)
        assert carried is not None
        assert carried.trace_id == span.context.trace_id
        assert carried.span_id == span.context.span_id
    assert telemetry.total("eventcraft.store.appends", **{"eventcraft.outcome": "ok"}) == 1
    assert telemetry.total("eventcraft.store.appended_events") == 2
    assert telemetry.total("eventcraft.store.append.duration") == 1


def test_a_single_event_append_names_its_message_id(telemetry: Telemetry) -> None:
    event = NewEvent("Placed", {})
    with EventStore.open("memory://") as store:
        store.append("order-2", [event])
    (span,) = telemetry.finished("publish order")
    assert span.attributes is not None
    assert span.attributes["messaging.message.id"] == str(event.id)
    assert "messaging.batch.message_count" not in span.attributes


def test_a_caller_s_own_traceparent_is_kept(telemetry: Telemetry) -> None:
    imported = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with EventStore.open("memory://") as store:
        store.append("order-3", [NewEvent("Placed", {}, metadata={TRACEPARENT: imported})])
        (event,) = store.read_stream("order-3")
    assert event.metadata[TRACEPARENT] == imported


def test_a_version_conflict_is_an_error_span_and_counted(telemetry: Telemetry) -> None:
    with EventStore.open("memory://") as store:
        store.append("order-4", [NewEvent("Placed", {})])
        with pytest.raises(WrongExpectedVersion):
            store.append("order-4", [NewEvent("Placed", {})], NO_STREAM)
    spans = telemetry.finished("publish order")
    failed = [s for s in spans if s.status.status_code is StatusCode.ERROR]
    assert len(failed) == 1
    assert failed[0].attributes is not None
    assert failed[0].attributes["error.type"] == "WrongExpectedVersion"
    assert telemetry.total("eventcraft.store.version_conflicts") == 1
    assert telemetry.total("eventcraft.store.appends", **{"eventcraft.outcome": "conflict"}) == 1


def test_bad_input_is_refused_as_before_and_recorded(telemetry: Telemetry) -> None:
    with EventStore.open("memory://") as store:
        with pytest.raises(InvalidEvent, match="must be a sequence of NewEvent"):
            store.append("order-5", NewEvent("Placed", {}))  # type: ignore[arg-type]
        assert store.stream_version("order-5") == 0
    (span,) = telemetry.finished("publish order")
    assert span.attributes is not None and span.attributes["error.type"] == "InvalidEvent"


def test_no_sdk_no_traceparent(store_url: str) -> None:
    with EventStore.open(store_url) as store:
        store.append("order-6", [NewEvent("Placed", {})])
        (event,) = store.read_stream("order-6")
    assert TRACEPARENT not in event.metadata


def test_the_async_store_traces_its_appends_alike(telemetry: Telemetry, store_url: str) -> None:
    async def main() -> list[dict[str, object]]:
        async with await AsyncEventStore.open(store_url) as store:
            await store.append("cart-1", [NewEvent("Added", {}), NewEvent("Added", {})])
            return [e.metadata async for e in store.read_stream("cart-1")]

    tracer = trace.get_tracer("test")
    with tracer.start_as_current_span("command"):
        metadata = asyncio.run(main())
    (span,) = telemetry.finished("publish cart")
    assert span.kind is SpanKind.PRODUCER
    assert span.attributes is not None
    assert span.attributes["messaging.batch.message_count"] == 2
    assert span.attributes["messaging.destination.name"] == "cart-1"
    contexts = [trace_context(m) for m in metadata]
    assert all(c is not None and c.span_id == span.context.span_id for c in contexts)
    assert telemetry.total("eventcraft.store.reads", **{"eventcraft.read.kind": "stream"}) == 1
