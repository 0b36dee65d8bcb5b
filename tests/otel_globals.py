"""OpenTelemetry's global providers put back to none set, for tests.

The API allows one global tracer and meter provider per process, set once. A
test (or a README snippet) that sets them must not leave them to the next
test: with none set the store writes no `traceparent`. So they are reset the
way opentelemetry-test-utils' `reset_*_globals` do, through the API's module
attributes.
"""

from __future__ import annotations


def reset() -> None:
    """No global tracer or meter provider (nothing to do without the API)."""
    try:
        from opentelemetry import trace
        from opentelemetry.metrics import _internal as metrics_internal
        from opentelemetry.util._once import Once
    except ImportError:
        return
    if trace._TRACER_PROVIDER is not None:
        trace._TRACER_PROVIDER = None
        trace._TRACER_PROVIDER_SET_ONCE = Once()
    if metrics_internal._METER_PROVIDER is not None:
        metrics_internal._METER_PROVIDER = None
        metrics_internal._METER_PROVIDER_SET_ONCE = Once()
