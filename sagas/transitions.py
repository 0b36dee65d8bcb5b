"""The events a saga instance's stream holds: one builder per transition.

`state.py` reads them back; these say what each one records.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

from eventcraft.eventstore import FORGOTTEN, NewEvent, RecordedEvent

from . import state as S
from .failures import StepFailure
from .personal import Part, recorded, sealed_text

Outcome = Literal["failed", "unknown"]
"""Of a failed try: it did not take effect, or it may have (it timed out, or its process died)."""


def started(
    stream: str,
    name: str,
    data: Part,
    deadline: float | None,
    correlation: str,
    subject: str | None = None,
) -> NewEvent:
    """`InvalidEvent` (naming the start data) if the store would refuse it.

    `subject`, whose the saga's personal data is, is kept only when there is one:
    a plain saga's start is recorded as before.
    """
    fields: dict[str, Any] = {"saga": name, "data": data, "deadline": deadline}
    fields["correlation_id"] = correlation
    if subject is not None:
        fields["subject"] = subject
    return NewEvent(
        S.STARTED,
        recorded(fields, f"the start data of saga {name!r}"),
        {"correlation_id": correlation},
        # The same id for every start of this instance: the store's own retry
        # rule turns a second start into a no-op.
        id=uuid.uuid5(uuid.NAMESPACE_URL, f"eventcraft:{stream}:started"),
    )


def step_started(
    step: str, attempt: int, owner: str, lease_until: float, deadline: float | None
) -> NewEvent:
    data = {"step": step, "attempt": attempt, "owner": owner, "lease_until": lease_until}
    return NewEvent(S.STEP_STARTED, {**data, "deadline": deadline})


def step_succeeded(step: str, result: Part) -> NewEvent:
    """`InvalidEvent` (naming the step and what it returned) if the store would refuse it."""
    # Checked now, by the store's own encoder, rather than by the append: this
    # event goes with the next move's append, and refused there it would fail
    # that move (again at each pass) rather than the step that returned it.
    data = recorded({"step": step, "result": result}, f"the result of step {step!r}")
    return NewEvent(S.STEP_SUCCEEDED, data)


def step_failed(
    step: str,
    attempt: int,
    error: str,
    outcome: Outcome,
    final: bool,
    failure: StepFailure,
    subject: str | None,
) -> list[NewEvent]:
    """The failed try, and the saga's failure with it when no try is left. `error` is
    sealed under the saga's `subject`, if it has one, its type (`failure.error_type`) in
    its place."""
    kind = failure.error_type
    failed = _failed_try(step, attempt, sealed_text(kind, error, subject), outcome, final)
    if not final:
        return [failed]
    return [failed, saga_failed(f"step {step} failed: {error}", failure, subject)]


def step_cut_short(step: str, attempt: int, reason: str, subject: str | None) -> NewEvent:
    """A try under way when its saga failed (it was cancelled): its outcome, if it had
    one, was never recorded. It may have taken effect, so it ends as a try that timed out
    on its last attempt does, possibly done, and is compensated with the others."""
    error = sealed_text("cut short", f"cut short: {reason}", subject)
    return _failed_try(step, attempt, error, "unknown", True)


def _failed_try(
    step: str, attempt: int, error: str | Part, outcome: Outcome, final: bool
) -> NewEvent:
    fields = {"step": step, "attempt": attempt, "error": error}
    data = recorded({**fields, "outcome": outcome, "final": final}, f"the error of step {step!r}")
    return NewEvent(S.STEP_FAILED, data)


def saga_failed(
    reason: str, failure: StepFailure | None = None, subject: str | None = None
) -> NewEvent:
    """The saga fails: `failure`, what its compensations are told, None when no step
    failed (a cancel). Its message is sealed under the saga's `subject`, if it has one."""
    if failure is None:
        return NewEvent(S.FAILED, {"reason": reason})
    plain = {"step": failure.step, "error_type": failure.error_type}
    part = _sealed(plain, "message", failure.message, subject)
    said = sealed_text(f"step {failure.step} failed: {failure.error_type}", reason, subject)
    return NewEvent(S.FAILED, recorded({"reason": said, "failure": part}, "a saga's failure"))


def compensation_ordered(reason: str) -> NewEvent:
    """An operator's word: compensate the parked instance (no step's failure to tell)."""
    return NewEvent(S.COMPENSATION_ORDERED, {"reason": reason})


def compensation_started(step: str, attempt: int, owner: str, lease_until: float) -> NewEvent:
    data = {"step": step, "attempt": attempt, "owner": owner, "lease_until": lease_until}
    return NewEvent(S.COMPENSATION_STARTED, data)


def compensation_succeeded(step: str) -> NewEvent:
    return NewEvent(S.COMPENSATION_SUCCEEDED, {"step": step})


def compensation_failed(
    step: str, attempt: int, error: str, error_type: str, final: bool, subject: str | None
) -> list[NewEvent]:
    """The failed try, and the saga parked with it when no try is left. `error` is sealed
    under the saga's `subject`, if it has one, `error_type` in its place."""
    said = sealed_text(error_type, error, subject)
    fields = {"step": step, "attempt": attempt, "error": said, "final": final}
    where = f"the error of the compensation of {step!r}"
    failed = NewEvent(S.COMPENSATION_FAILED, recorded(fields, where))
    return [failed, parked(step, said)] if final else [failed]


def parked(step: str, error: str | Part) -> NewEvent:
    """The saga parks on its compensation of `step`: `error`, the clear text or one
    `sealed_text` made."""
    return NewEvent(S.PARKED, recorded({"step": step, "error": error}, f"parking on {step!r}"))


def parked_on_bug(
    step: str, attempt: int, error_type: str, message: str, traceback: str, subject: str | None
) -> NewEvent:
    """The saga parks on what step `step` raised undeclared: its type and traceback in
    the clear, its message (which may quote personal data) sealed under `subject`."""
    bug = _sealed({"error_type": error_type, "traceback": traceback}, "message", message, subject)
    error = f"step {step} raised {error_type}, which it does not declare (a bug?)"
    fields = {"step": step, "attempt": attempt, "error": error, "bug": bug}
    return NewEvent(S.PARKED, recorded(fields, f"the error of step {step!r}"))


def _sealed(plain: dict[str, Any], key: str, value: str, subject: str | None) -> Part:
    """`plain` with `key` beside it, sealed under `subject` if there is one."""
    if subject is None:
        return Part({**plain, key: value})
    return Part(plain, {key: (subject, value)})


def completed() -> NewEvent:
    return NewEvent(S.COMPLETED, {})


def compensated(reason: str | None, clear: str | None, subject: str | None) -> NewEvent:
    """The saga is compensated, for `reason` (sealed under `subject`, if it has one,
    `clear` in its place, as its failure was)."""
    if reason is None or clear is None or reason in (clear, f"{clear}: {FORGOTTEN}"):
        # Nothing to seal: a saga of no one's, or its subject forgotten already.
        return NewEvent(S.COMPENSATED, {"reason": reason})
    said = sealed_text(clear, reason, subject)
    return NewEvent(S.COMPENSATED, recorded({"reason": said}, "a saga's compensation"))


def retried() -> NewEvent:
    return NewEvent(S.RETRIED, {})


def resolved(note: str) -> NewEvent:
    return NewEvent(S.RESOLVED, {"note": note})


def signalled(stream: str, correlation: str, event: RecordedEvent, data: Part) -> NewEvent:
    """`event`, signalled with `data` (its data, its personal fields apart)."""
    fields = {"type": event.type, "data": data, "event_id": str(event.id)}
    return NewEvent(
        S.SIGNALLED,
        recorded(fields, f"the data of the signalled {event.type}"),
        {"correlation_id": correlation, "causation_id": str(event.id)},
        # One id per (instance, event): delivering the event again records nothing.
        id=uuid.uuid5(uuid.NAMESPACE_URL, f"eventcraft:{stream}:{event.id}"),
    )
