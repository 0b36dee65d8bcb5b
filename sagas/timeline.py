"""An instance's stream read back as its timeline, for a person: each transition with the
step and try it concerns, the idempotency key the action or compensation was called
with, its error, and a note saying what else it records.

The transitions' event types are the saga stream's stored format (`state.py` names
them, `transitions.py` builds them); this reads them, so that a shell shows a timeline
without knowing them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from eventcraft.eventstore import RecordedEvent

from . import state as S
from .personal import read_text
from .state import idempotency_key

_TRIES = {
    S.STEP_STARTED: False,
    S.STEP_SUCCEEDED: False,
    S.STEP_FAILED: False,
    S.COMPENSATION_STARTED: True,
    S.COMPENSATION_SUCCEEDED: True,
    S.COMPENSATION_FAILED: True,
}
"""The transitions of one try of an action (False) or a compensation (True)."""


@dataclass(frozen=True)
class SagaTransition:
    """One transition of an instance, as recorded in its stream.

    Example::

        from eventcraft.eventstore import EventStore
        from eventcraft.sagas import Failure, Orchestrator, Saga, SagaTransition, Step
        from eventcraft.sagas import saga_timeline, stream_of

        def charge(data, context):
            return Failure("card declined")

        checkout = Saga("checkout", [Step("charge", charge)])
        store = EventStore.open("sqlite:///shop.db")
        orchestrator = Orchestrator(store, [checkout])
        orchestrator.start(checkout, {"cents": 250_000}, saga_id="order-1")
        orchestrator.run_pending()
        stream = stream_of("checkout", "order-1")
        failed: SagaTransition = next(
            t for t in saga_timeline(stream, store.read_stream(stream)) if t.type == "StepFailed"
        )
        assert (failed.step, failed.attempt) == ("charge", 1)
        assert failed.idempotency_key == "saga-checkout:order-1/charge"
        assert (failed.error, failed.note) == ("Failure('card declined')", "outcome failed, final")
        store.close()
    """

    version: int
    """Its version in the instance's stream."""
    position: int
    """Its position in the log."""
    recorded_at: datetime
    type: str
    """The transition's event type (`SagaStarted`, `StepFailed`, ...)."""
    step: str | None
    """The step a try, or a parking, concerns; None for the others."""
    attempt: int | None
    """Which try of the step it is, for a try's transitions."""
    idempotency_key: str | None
    """The key the action or compensation was (or is to be) called with."""
    error: str | None
    result: Any
    """A succeeded step's result (None otherwise)."""
    note: str | None
    """A failure's reason, a resolution's note, a signal's event type, a try's outcome."""
    data: dict[str, Any]
    """The transition's data, whole."""


def saga_timeline(stream_id: str, events: Iterable[RecordedEvent]) -> list[SagaTransition]:
    """The transitions the instance's stream `stream_id` holds (`events`, as read from it),
    in order.

    Example::

        from eventcraft.eventstore import EventStore
        from eventcraft.sagas import Orchestrator, Saga, Step, saga_timeline, stream_of

        def reserve(data, context):
            return {"reservation": context.idempotency_key}

        fulfilment = Saga("fulfilment", [Step("reserve", reserve)])
        store = EventStore.open("sqlite:///shop.db")
        orchestrator = Orchestrator(store, [fulfilment])
        orchestrator.start(fulfilment, {"sku": "tea"}, saga_id="order-1")
        orchestrator.run_pending()
        stream = stream_of("fulfilment", "order-1")
        timeline = saga_timeline(stream, store.read_stream(stream))
        assert [(t.type, t.step) for t in timeline] == [
            ("SagaStarted", None),
            ("StepStarted", "reserve"),
            ("StepSucceeded", "reserve"),
            ("SagaCompleted", None),
        ]
        assert timeline[2].result == {"reservation": "saga-fulfilment:order-1/reserve"}
        store.close()
    """
    return [_transition(stream_id, event) for event in events]


def _transition(stream: str, event: RecordedEvent) -> SagaTransition:
    d = event.data
    step = d.get("step") if event.type in _TRIES or event.type == S.PARKED else None
    compensating = _TRIES.get(event.type)
    key = None
    if compensating is not None and step is not None:
        key = idempotency_key(stream, step, compensating)
    return SagaTransition(
        version=event.version,
        position=event.position,
        recorded_at=event.recorded_at,
        type=event.type,
        step=step,
        attempt=d.get("attempt"),
        idempotency_key=key,
        error=read_text(d, "error"),
        result=d.get("result"),
        note=_note(event),
        data=d,
    )


def _note(event: RecordedEvent) -> str | None:
    d = event.data
    if event.type in (S.FAILED, S.COMPENSATED, S.COMPENSATION_ORDERED):
        return read_text(d, "reason")
    if event.type == S.RESOLVED:
        return d.get("note")
    if event.type == S.SIGNALLED:
        return f"signalled {d.get('type')}"
    if event.type == S.STEP_FAILED:
        return f"outcome {d.get('outcome')}" + (", final" if d.get("final") else "")
    if event.type == S.COMPENSATION_FAILED and d.get("final"):
        return "final"
    return None
