"""Without opentelemetry-api installed, everything works and records nothing."""

from __future__ import annotations

import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent(
    """
    import sys

    sys.modules["opentelemetry"] = None  # as if the `otel` extra were not installed

    from eventcraft.eventstore import EventStore, NewEvent, telemetry
    from eventcraft.projections import ProjectionRunner, Subscription
    from eventcraft.sagas import Orchestrator, Saga, Step

    assert telemetry.otel_trace is None and telemetry.tracer_provider() is None
    seen = []
    saga = Saga("ship", [Step("pack", lambda data, context: "packed")])
    with EventStore.open("memory://") as store:
        store.append("order-1", [NewEvent("OrderPlaced", {})])
        with ProjectionRunner(store, [Subscription("seen", seen.append)]) as runner:
            runner.catch_up()
        orchestrator = Orchestrator(store, [saga])
        orchestrator.start(saga, {}, saga_id="1")
        assert orchestrator.run_pending() == 0
        (event,) = store.read_stream("order-1")
    assert [e.type for e in seen] == ["OrderPlaced"]
    assert "traceparent" not in event.metadata
    carried = {"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}
    assert telemetry.trace_context(carried) is None
    print("ok")
    """
)


def test_a_store_projection_and_saga_run_without_the_api() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
