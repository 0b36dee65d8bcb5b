"""The console's `/metrics`: eventcraft's metrics in Prometheus' text format.

Served when the console is created with `metrics=True` (`eventcraft console
--metrics`), from the OpenTelemetry SDK's Prometheus reader (the `prometheus`
extra). It shows

- the App's projections as the log sees them, read at each scrape:
  `eventcraft_projection_lag` (events after the checkpoint it would apply),
  `eventcraft_projection_lag_duration_seconds` (age of the oldest event not applied)
  and `eventcraft_projection_parked` (events in the error store), per projection,
  and the log's `eventcraft_store_high_water_mark`;
- everything eventcraft records in this process (appends, batches, saga steps), when
  the process had no OpenTelemetry meter provider of its own: the console then
  installs its own as the global one. An application that set up its own provider
  exports those metrics through it instead.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from eventcraft.eventstore import EventStore
from eventcraft.eventstore import telemetry as store_telemetry
from eventcraft.projections import LAG_COUNTED, make_projection_gauges
from eventcraft.sagas import make_saga_gauges

from ..app import App
from ..operations import projections as projection_operations
from ..operations.errors import InputError

if TYPE_CHECKING:
    from opentelemetry.metrics import CallbackOptions, Observation

FRESH = 1.0
"""Seconds a reading of the projections serves the gauges of one scrape (and close ones)."""
GROUP = "messaging.consumer.group.name"


class Metrics:
    """A meter provider of the console's own, read by a Prometheus reader into a registry
    of its own; `exposition()` is the text a scrape gets."""

    def __init__(self, store: EventStore, app: App) -> None:
        try:
            from opentelemetry import metrics
            from opentelemetry.exporter.prometheus import PrometheusMetricReader
            from opentelemetry.sdk.metrics import MeterProvider
            from prometheus_client import CollectorRegistry
        except ImportError as error:
            raise InputError(
                "the console's /metrics needs its extra: "
                f"pip install 'eventcraft[prometheus]' ({error})"
            ) from error
        self.store = store
        self.app = app
        self.registry = CollectorRegistry()
        self.provider = MeterProvider(
            metric_readers=[PrometheusMetricReader(registry=self.registry)]
        )
        self._lock = threading.Lock()
        self._read_at = 0.0
        self._statuses: list[Any] = []
        self._head = 0
        meter = self.provider.get_meter("eventcraft.console")
        meter.create_observable_gauge(
            "eventcraft.projection.lag",
            [self._lag],
            "{event}",
            f"Events after a projection's checkpoint it would apply, at most {LAG_COUNTED}",
        )
        meter.create_observable_gauge(
            "eventcraft.projection.lag.duration",
            [self._lag_seconds],
            "s",
            "Age of the oldest event a projection reads and has not applied; 0 when current",
        )
        meter.create_observable_gauge(
            "eventcraft.projection.parked",
            [self._parked],
            "{event}",
            "Events waiting in a projection's error store",
        )
        meter.create_observable_gauge(
            "eventcraft.store.high_water_mark",
            [self._high_water_mark],
            "{position}",
            "The position up to which the log is complete",
        )
        self.global_provider = store_telemetry.meter_provider() is None
        """Whether this provider is the process's: it then records eventcraft's own metrics."""
        if self.global_provider:
            metrics.set_meter_provider(self.provider)
        # The packages' observable gauges are made now: made during a scrape (by the
        # runner a reading of the projections opens), they would wait for the lock
        # the scrape holds.
        make_projection_gauges()
        make_saga_gauges()

    def exposition(self) -> tuple[bytes, str]:
        """The metrics now, in Prometheus' text format, and its content type."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST

    def route(self) -> Route:
        def serve(request: Request) -> Response:
            content, media_type = self.exposition()
            return Response(content, media_type=media_type)

        return Route("/metrics", serve, methods=["GET"], name="metrics")

    def close(self) -> None:
        self.provider.shutdown()

    def _read(self) -> list[Any]:
        # The three gauges are collected one after another: one read serves them all.
        with self._lock:
            if time.monotonic() - self._read_at > FRESH:
                self._statuses = projection_operations.status(self.store, self.app)
                self._head = self.store.high_water_mark()
                self._read_at = time.monotonic()
            return self._statuses

    def _lag(self, options: CallbackOptions) -> Iterable[Observation]:
        from opentelemetry.metrics import Observation

        return [Observation(s.lag_events, {GROUP: s.name}) for s in self._read()]

    def _lag_seconds(self, options: CallbackOptions) -> Iterable[Observation]:
        from opentelemetry.metrics import Observation

        return [Observation(s.lag_seconds, {GROUP: s.name}) for s in self._read()]

    def _parked(self, options: CallbackOptions) -> Iterable[Observation]:
        from opentelemetry.metrics import Observation

        return [Observation(s.parked, {GROUP: s.name}) for s in self._read()]

    def _high_water_mark(self, options: CallbackOptions) -> Iterable[Observation]:
        from opentelemetry.metrics import Observation

        self._read()
        return [Observation(self._head)]
