"""OpenTelemetry for aggregates: a span per load, with the events read and the snapshot used.

`Repository.load` and `AsyncRepository.load` both run inside `loading(...)`.
Nothing is recorded until the application configures an OpenTelemetry SDK;
then a load is an INTERNAL span `load {category}`, child of the current
context (the command's), and its time goes into `eventcraft.aggregate.load.duration`.

A load's error is told by its type and where it was raised (`store_telemetry.told`),
as are the snapshot warnings here: an exception's message, or a validation error's
input, may quote the aggregate's state, personal fields included.
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import TYPE_CHECKING, Any

from eventcraft.eventstore import telemetry as store_telemetry
from pydantic import ValidationError

if TYPE_CHECKING:
    from opentelemetry.metrics import Meter
    from opentelemetry.trace import Span

SCOPE = "eventcraft.domain"
EVENTS_READ = "eventcraft.aggregate.events_read"
SNAPSHOT_USED = "eventcraft.aggregate.snapshot_used"
SNAPSHOT_KEPT = "the exception EventStore.save_snapshot raises (it is not kept)"
"""Where the message of a snapshot that could not be saved is, as the warning says."""


def unsaved(error: BaseException) -> str:
    """Why a snapshot was not saved, for a warning: `error` told by its type and where it
    was raised (its message may quote the state's fields)."""
    return store_telemetry.told(error, SNAPSHOT_KEPT)


def misfit(error: ValidationError) -> str:
    """What a snapshot's state failed on, for a warning: each error's top-level field and
    kind, never the input, which is the state's data (pydantic's message quotes it)."""
    found = error.errors(include_url=False, include_context=False, include_input=False)
    return "; ".join(f"{e['loc'][0] if e['loc'] else '(the state)'}: {e['type']}" for e in found)


class _Instruments:
    def __init__(self, meter: Meter) -> None:
        self.duration = meter.create_histogram(
            "eventcraft.aggregate.load.duration", "s", "Time an aggregate's load took"
        )
        self.events = meter.create_counter(
            "eventcraft.aggregate.events_read", "{event}", "Events read to load aggregates"
        )


SCOPED = store_telemetry.Scoped(SCOPE, _Instruments)


class _Quiet:
    """What `loading` gives when nothing records: every call does nothing."""

    def __enter__(self) -> _Quiet:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def snapshot(self, version: int) -> None:
        return None

    def loaded(self, version: int) -> None:
        return None


_QUIET = _Quiet()


def loading(category: str, stream_id: str) -> Load | _Quiet:
    """The telemetry of one load of the aggregate whose stream is `stream_id`, as `with`."""
    tracer = SCOPED.tracer()
    instruments = SCOPED.instruments()
    if tracer is None and instruments is None:
        return _QUIET
    return Load(tracer, instruments, category, stream_id)


class Load:
    """A load being traced: tell it the snapshot's version, then the version reached."""

    def __init__(
        self, tracer: Any, instruments: _Instruments | None, category: str, stream_id: str
    ) -> None:
        self._instruments = instruments
        self._category = category
        self._from = 0
        self._span: Span | None = None
        self._scope: Any = None
        if tracer is not None:
            self._scope = tracer.start_as_current_span(
                f"load {category}",
                attributes={
                    "eventcraft.aggregate.category": category,
                    "eventcraft.stream_id": stream_id,
                },
                record_exception=False,
                set_status_on_exception=False,
            )
        self._started = time.perf_counter()

    def __enter__(self) -> Load:
        if self._scope is not None:
            self._span = self._scope.__enter__()
        self._started = time.perf_counter()
        return self

    def snapshot(self, version: int) -> None:
        """The load starts after a snapshot at `version` (0: none fitted)."""
        self._from = version

    def loaded(self, version: int) -> None:
        """The stream was read up to `version`."""
        read = max(version - self._from, 0)
        span = self._span
        if span is not None and span.is_recording():
            span.set_attribute(SNAPSHOT_USED, self._from > 0)
            span.set_attribute(EVENTS_READ, read)
            span.set_attribute(store_telemetry.STREAM_VERSION, version)
        if self._instruments is not None:
            self._instruments.events.add(read, {"eventcraft.aggregate.category": self._category})

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._instruments is not None:
            self._instruments.duration.record(
                time.perf_counter() - self._started,
                {"eventcraft.aggregate.category": self._category},
            )
        if self._scope is None:
            return
        if exc is not None and self._span is not None:
            store_telemetry.record_error(self._span, exc)
        self._scope.__exit__(exc_type, exc, tb)
