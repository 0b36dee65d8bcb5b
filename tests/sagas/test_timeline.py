"""An instance's stream read back as its timeline through the sagas' face: each transition
with its step, try, idempotency key and note, without the shell knowing the stream's
event types."""

from __future__ import annotations

from eventcraft.eventstore import EventStore
from eventcraft.sagas import SagaTransition, saga_timeline

from ..cli.apps import run_sagas


def test_a_parked_instance_reads_back_as_its_transitions(store: EventStore) -> None:
    run_sagas(store)
    stream = "saga-payout:p1"
    stored = list(store.read_stream(stream))
    timeline = saga_timeline(stream, stored)
    assert all(isinstance(t, SagaTransition) for t in timeline)
    key = "saga-payout:p1/"
    assert [(t.type, t.step, t.attempt, t.idempotency_key) for t in timeline] == [
        ("SagaStarted", None, None, None),
        ("StepStarted", "charge", 1, key + "charge"),
        ("StepSucceeded", "charge", None, key + "charge"),
        ("StepStarted", "ship", 1, key + "ship"),
        ("StepFailed", "ship", 1, key + "ship"),
        ("SagaFailed", None, None, None),
        ("CompensationStarted", "charge", 1, key + "charge/compensation"),
        ("CompensationFailed", "charge", 1, key + "charge/compensation"),
        ("SagaParked", "charge", None, None),
    ]
    failed = timeline[5]
    assert failed.note == "step ship failed: RuntimeError('no courier')"
    assert timeline[4].note is not None and timeline[4].note.startswith("outcome ")
    assert [(t.version, t.position, t.data) for t in timeline] == [
        (e.version, e.position, e.data) for e in stored
    ]
