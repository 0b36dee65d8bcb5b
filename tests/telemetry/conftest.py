"""An OpenTelemetry SDK for one test at a time: in-memory spans and metrics, set as the
global providers and put back to none afterwards (`tests/otel_globals.py`)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ..otel_globals import reset


@dataclass
class Telemetry:
    spans: InMemorySpanExporter
    reader: InMemoryMetricReader

    def finished(self, name: str | None = None) -> list[ReadableSpan]:
        spans = list(self.spans.get_finished_spans())
        return spans if name is None else [s for s in spans if s.name == name]

    def points(self, metric: str) -> list[Any]:
        """The data points of `metric` collected now, of every scope."""
        data = self.reader.get_metrics_data()
        found: list[Any] = []
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for item in scope.metrics:
                    if item.name == metric:
                        found.extend(item.data.data_points)
        return found

    def total(self, metric: str, **attributes: Any) -> float:
        """The sum (or count, for a histogram) of `metric`'s points with these attributes."""
        total = 0.0
        for point in self.points(metric):
            if all(point.attributes.get(k) == v for k, v in attributes.items()):
                value = getattr(point, "value", None)
                total += getattr(point, "count", 0) if value is None else value
        return total


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    reset()
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(meter_provider)
    try:
        yield Telemetry(exporter, reader)
    finally:
        reset()
        tracer_provider.shutdown()
        meter_provider.shutdown()


@pytest.fixture
def no_provider() -> Iterator[None]:
    """No global tracer or meter provider, before and after the test (which may set one)."""
    reset()
    try:
        yield
    finally:
        reset()
