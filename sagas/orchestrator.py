"""Run saga instances to their end, durably: record each transition, then act on it.

Every move is appended to the instance's stream (`journal.py`) first. An
action or compensation is called only after its start is recorded, with a
lease saying how long its owner may take; a start that no outcome follows
(its process died) is taken over by anyone once the lease lapses, and
retried with the same idempotency key. Deadlines are stored in the stream
too, so they hold across restarts.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from eventcraft.eventstore import (
    NO_STREAM,
    DuplicateEventId,
    EventStore,
    InvalidEvent,
    NewEvent,
    RecordedEvent,
    WrongExpectedVersion,
)
from eventcraft.projections import bare_traceback
from pydantic import BaseModel

from . import telemetry
from . import transitions as T
from .calls import call, refuse_in_running_loop
from .context import StepContext
from .definition import START, Awaiting, Saga, Step
from .errors import (
    EventLoopRunning,
    SagaDefinitionError,
    SagaNotFound,
    SagaNotParked,
    StepTimedOut,
    UnknownSaga,
)
from .failures import Failure, StepFailure, type_name
from .index import SAGA_CATEGORY, SagaIndex
from .journal import Journal, saga_of_stream, stream_of
from .personal import Part, check_subject, given_part, part_of
from .service import OrchestratorStatus, StatusBoard, keep_running
from .state import InFlight, SagaState, idempotency_key

log = logging.getLogger("eventcraft.sagas")

MAX_CRASHES = 5
"""Tries of one step that may end with no outcome (their process died) before it is failed."""
_MAX_ID = 200


class Orchestrator:
    """Starts and advances instances of `sagas`, kept in `store`.

    `lease` bounds how long a step without a timeout may run before another
    orchestrator presumes its owner dead and retries it.

    Example::

        from eventcraft.eventstore import EventStore
        from eventcraft.sagas import Orchestrator, Saga, Step

        stock = {"tea": 10}

        def reserve(data, context):
            stock[data["sku"]] -= 1
            return {"reservation": context.idempotency_key}

        def release(data, context):
            stock[data["sku"]] += 1

        fulfilment = Saga("fulfilment", [Step("reserve", reserve, release)])
        store = EventStore.open("sqlite:///shop.db")
        orchestrator = Orchestrator(store, [fulfilment])
        orchestrator.start(fulfilment, {"order_id": "42", "sku": "tea"}, saga_id="42")
        assert orchestrator.run_pending() == 0  # or run(stop) in a service's main loop
        assert orchestrator.state("fulfilment", "42").status == "completed"
        assert stock == {"tea": 9}
        store.close()
    """

    def __init__(
        self,
        store: EventStore,
        sagas: Iterable[Saga],
        *,
        lease: float = 30.0,
        owner: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.tenant: str | None = getattr(store, "tenant", None)
        """The tenant whose store it runs the sagas of; None for a store of no tenant."""
        self.sagas = {saga.name: saga for saga in sagas}
        if not all(isinstance(s, Saga) for s in self.sagas.values()):
            raise SagaDefinitionError("an orchestrator runs Saga definitions")
        if not isinstance(lease, int | float) or lease <= 0:
            raise SagaDefinitionError(f"lease must be seconds > 0, not {lease!r}")
        self.lease = float(lease)
        self.owner = owner or f"{os.uname().nodename}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.clock = clock
        self._index = SagaIndex(store)
        journal = Journal(store, self.owner)
        self._record, self._load = journal.record, journal.load
        self._board = StatusBoard(self.owner)
        telemetry.watch(self._index)

    # --- starting and reading ---------------------------------------------------

    def start(
        self,
        saga: Saga,
        data: dict[str, Any] | BaseModel,
        *,
        saga_id: str | None = None,
        correlation_id: str | None = None,
        subject: str | None = None,
        personal: Mapping[str, Any] | None = None,
    ) -> str:
        """Record a new instance and return its id; starting an existing id does nothing.

        `subject` is whose the saga's personal data is: the fields of `personal`,
        which the steps see in their data beside those of `data`, and the fields a
        model marks `Personal()` (`data` as a pydantic model, a step's result). Each
        is sealed under its subject's key, as a domain event's personal fields are;
        once the subject is forgotten, the saga reads them as `FORGOTTEN`.
        """
        self.definition(saga.name)
        saga_id = uuid.uuid4().hex if saga_id is None else saga_id
        if not isinstance(saga_id, str) or not saga_id or len(saga_id) > _MAX_ID:
            raise SagaDefinitionError(f"a saga id is a str of 1-{_MAX_ID} characters")
        part = _start_data(data, subject, personal, f"saga {saga.name!r}: start data")
        stream = stream_of(saga.name, saga_id)
        deadline = None if saga.timeout is None else self.clock() + saga.timeout
        correlation = correlation_id or saga_id
        started = T.started(stream, saga.name, part, deadline, correlation, subject)
        with contextlib.suppress(WrongExpectedVersion):  # started before, by an earlier call
            self.store.append(stream, [started], expected_version=NO_STREAM)
        return saga_id

    def state(self, name: str, saga_id: str) -> SagaState:
        found = self._load(stream_of(name, saga_id))
        if found is None:
            raise SagaNotFound(name, saga_id)
        return found

    def instances(self) -> Iterator[SagaState]:
        """Every instance in the store, of any saga, in stream order."""
        for info in self.store.list_streams(category=SAGA_CATEGORY):
            found = self._load(info.stream_id)
            if found is not None:
                yield found

    def parked(self) -> list[SagaState]:
        """The instances of this orchestrator's sagas that are parked, in stream order."""
        self._index.refresh()
        found = (self._load(stream) for stream in sorted(self._index.parked) if self._runs(stream))
        return [s for s in found if s is not None and s.status == "parked"]

    # --- running ------------------------------------------------------------------

    def run_pending(self) -> int:
        """Advance every unfinished instance as far as it goes now; how many remain unfinished.

        Those that remain are parked, waiting (for a signal or a retry's
        back-off), or being run by another orchestrator. Instances of sagas
        this orchestrator was not given are left alone. Called from a running
        event loop with async steps to run, it raises `EventLoopRunning`.
        """
        refuse_in_running_loop("run_pending", self.sagas.values())
        self._index.refresh()
        remaining = sum(1 for stream in self._index.parked if self._runs(stream))
        for stream in sorted(self._index.active):
            if not self._runs(stream):
                continue  # another service's saga, in the same store
            name, saga_id = saga_of_stream(stream)
            if not self.advance(name, saga_id).finished:
                remaining += 1
        return remaining

    def run(self, stop: threading.Event, *, poll: float = 0.2) -> None:
        """Keep advancing instances until `stop` is set (a service's main loop).

        An outage of the store does not end it: it backs off, says so in
        `status()`, and carries on when the store is back (`service.py`).
        """
        refuse_in_running_loop("run", self.sagas.values())
        keep_running(self.run_pending, stop, poll, self._board)

    def status(self) -> OrchestratorStatus:
        """What the `run()` loop is doing (running, waiting for the store...); no store call."""
        return self._board.status

    def advance(self, name: str, saga_id: str) -> SagaState:
        """Drive one instance until it finishes, parks, or another owner holds it."""
        saga = self.definition(name)
        refuse_in_running_loop("advance", [saga])
        stream = stream_of(name, saga_id)
        current = self._load(stream)
        while True:
            if current is None:
                raise SagaNotFound(name, saga_id)
            if current.finished or current.status == "parked":
                return self._flushed(current)
            flight = current.in_flight
            if flight and flight.owner and flight.owner != self.owner and self._held(flight):
                return self._flushed(current)  # its owner is (presumably) alive and at it
            try:
                if current.status == "running":
                    self._forward(saga, current)
                else:
                    self._backward(saga, current)
            except _Waiting:
                return self._flushed(current)
            if current.stale:
                current = self._load(stream)

    def _flushed(self, current: SagaState) -> SagaState:
        """`current`, with the transitions held back for the next move appended now."""
        if current.unsaved and not self._record(current, []):
            return self._load(current.stream_id) or current  # what the other one made of it
        return current

    # --- events from outside ------------------------------------------------------

    def signal(
        self, name: str, saga_id: str, event: RecordedEvent, *, data: BaseModel | None = None
    ) -> bool:
        """Hand `event` to the instance, for a step waiting on its type; False if finished.

        Signalling the same event again records nothing (its id is kept). The saga
        keeps a copy of the event's data: given `data`, the event's data typed (a
        pydantic model, as `registry.decode(event)` gives it), the copy keeps the
        fields it marks `Personal` sealed under their subjects (`Personal()`: the
        event's stream), as the event itself does. `event.data` is copied as it is.
        """
        current = self.state(name, saga_id)
        if current.finished:
            return False
        where = f"the data of the {event.type} signalled into {current.stream_id}"
        part = part_of(event.data if data is None else data, event.stream_id, where)
        signalled = T.signalled(current.stream_id, current.correlation_id, event, part)
        with contextlib.suppress(DuplicateEventId):
            self.store.append(current.stream_id, [signalled])
        return True

    def cancel(self, name: str, saga_id: str, reason: str) -> bool:
        """Stop a running instance and compensate what it did; False if it was not running.

        An action under way is not interrupted: once it returns (or its owner's
        lease lapses) it is compensated as possibly done, with the steps before it.
        """
        while True:
            current = self.state(name, saga_id)
            if current.status != "running":
                return False
            if self._record(current, [T.saga_failed(f"cancelled: {reason}")]):
                return True

    # --- the error store ----------------------------------------------------------

    def retry(self, name: str, saga_id: str) -> SagaState:
        """Run a parked instance again from where it stopped: the step it parked on (a
        bug, fixed since), with the same idempotency key, or its compensations."""
        refuse_in_running_loop("retry", [self.definition(name)])
        self._settle(name, saga_id, T.retried)
        return self.advance(name, saga_id)

    def compensate(self, name: str, saga_id: str, reason: str) -> SagaState:
        """Compensate a parked instance on an operator's word (`reason`, kept): what its
        steps did is undone, the step it parked on too if it compensates on failure.
        Its compensations are told no failure (`context.failure` is None)."""
        refuse_in_running_loop("compensate", [self.definition(name)])
        self._settle(name, saga_id, lambda: T.compensation_ordered(str(reason)))
        return self.advance(name, saga_id)

    def resolve(self, name: str, saga_id: str, note: str) -> SagaState:
        """Mark a parked instance settled by hand; nothing runs for it again."""
        self._settle(name, saga_id, lambda: T.resolved(str(note)))
        return self.state(name, saga_id)

    def _settle(self, name: str, saga_id: str, transition: Callable[[], NewEvent]) -> None:
        """Record `transition` on the parked instance, or raise `SagaNotParked`.

        Checked again after a refused append: another operator (or orchestrator) may
        have retried or resolved it since it was read, and then this one must not.
        """
        while True:
            current = self.state(name, saga_id)
            if current.status != "parked":
                raise SagaNotParked(current.stream_id, current.status)
            if self._record(current, [transition()]):
                return

    # --- moves ----------------------------------------------------------------------

    def _forward(self, saga: Saga, current: SagaState) -> None:
        now = self.clock()
        if len(current.succeeded) == len(saga.steps):
            self._record(current, [T.completed()])
            return
        step = saga.steps[len(current.succeeded)]
        attempt = current.attempts.get(step.name, 0) + 1
        flight = current.in_flight
        saga_late = current.deadline is not None and now >= current.deadline
        waiting = isinstance(step.action, Awaiting)
        if flight is not None and not waiting and saga_late:
            error = "the saga timed out"
            self._fail(current, step, attempt - 1, error, "unknown", "SagaTimedOut", final=True)
        elif flight is not None and not waiting and (flight.deadline or now + 1) <= now:
            # Under way when its owner died, and past its timeout: a try that
            # timed out, as if its owner had lived to see it. Retried (with the
            # same key) while the policy allows; possibly done, if not.
            final = current.failures.get(step.name, 0) + 1 >= step.retry.attempts
            self._fail(
                current, step, attempt - 1, "timed out", "unknown", "StepTimedOut", final=final
            )
        elif saga_late:
            reason = f"the saga ran past its timeout at step {step.name}"
            failure = StepFailure(step.name, "SagaTimedOut", reason)
            self._record(current, [T.saga_failed(reason, failure, current.subject)])
        elif current.lost_tries(step.name, compensating=False) >= MAX_CRASHES:
            # Every try so far died with its process: a poison step, not bad luck.
            error = f"{MAX_CRASHES} tries ended with no outcome"
            self._fail(current, step, attempt - 1, error, "unknown", "NoOutcome", final=True)
        elif isinstance(step.action, Awaiting):
            self._wait(current, step, attempt)
        else:
            # A try cut short by a crash is tried again with the same key; only
            # recorded failures use up the retry policy's tries.
            self._try(saga, current, step, attempt)

    def _wait(self, current: SagaState, step: Step, attempt: int) -> None:
        assert isinstance(step.action, Awaiting)
        signal = current.signals.get(step.action.event_type)
        now = self.clock()
        if current.in_flight is None:
            # Recorded so that its deadline holds across restarts; no one owns a wait
            # (nor holds a lease on it).
            deadline = None if step.timeout is None else now + step.timeout
            if not self._record(current, [T.step_started(step.name, attempt, "", 0.0, deadline)]):
                return
        if signal is not None:
            subjects = current.signal_subjects.get(step.action.event_type, {})
            plain = {key: value for key, value in signal.items() if key not in subjects}
            personal = {key: (owner, signal.get(key)) for key, owner in subjects.items()}
            succeeded = T.step_succeeded(step.name, Part(plain, personal))
            self._record(current, [succeeded], defer=True)
        elif current.in_flight is not None and (current.in_flight.deadline or now + 1) <= now:
            error = f"no {step.action.event_type} within {step.timeout} s"
            self._fail(current, step, attempt, error, "failed", "StepTimedOut", final=True)
        else:
            raise _Waiting

    def _try(self, saga: Saga, current: SagaState, step: Step, attempt: int) -> None:
        now = self.clock()
        # The try's own deadline is the step's timeout; the saga's deadline, if
        # sooner, also cuts the call short, and is checked apart on recovery.
        own_deadline = None if step.timeout is None else now + step.timeout
        cut_off = min((d for d in (own_deadline, current.deadline) if d is not None), default=None)
        timeout = None if cut_off is None else max(cut_off - now, 0.001)
        # The owner gives up at the step's timeout; a step without one is
        # presumed abandoned after `lease` (a longer step should declare a timeout).
        began = time.monotonic()
        lease_until = self._lease_until(min(step.timeout or self.lease, timeout or float("inf")))
        started = T.step_started(step.name, attempt, self.owner, lease_until, own_deadline)
        if not self._record(current, [started]):
            return
        context = self._context(current, step, attempt, compensating=False)
        try:
            with telemetry.step_try(current, context):
                result = call(step.action, current.data, context, _left(timeout, began))
        except StepTimedOut as error:
            said = str(error)
            if step.timeout is not None and own_deadline == cut_off:
                # Said with the timeout the step declares, not with what was left of
                # it once its start was recorded (the seconds the call was given).
                said = str(StepTimedOut(step.name, step.timeout))
            final = current.failures.get(step.name, 0) + 1 >= step.retry.attempts
            self._fail(current, step, attempt, said, "unknown", "StepTimedOut", final=final)
            return
        except EventLoopRunning:
            raise  # the caller's limit, not the step's failure
        except Exception as error:
            kind = step.kind_of(error)
            if kind == "bug":
                self._park(current, step, attempt, error)
                return
            failures = current.failures.get(step.name, 0) + 1
            final = kind == "fail" or failures >= step.retry.attempts or not step.retryable(error)
            failed = self._fail(
                current,
                step,
                attempt,
                repr(error),
                "failed",
                type_name(error),
                str(error),
                final=final,
            )
            if failed and not final:
                time.sleep(step.retry.delay(failures))
            return
        if isinstance(result, Failure):
            said = f"Failure({result.reason!r})"
            self._fail(current, step, attempt, said, "failed", "Failure", result.reason, final=True)
            return
        try:
            where = f"the result of step {step.name!r}"
            succeeded = T.step_succeeded(step.name, part_of(result, current.subject, where))
        except InvalidEvent as error:
            # It took effect but its result cannot be kept: undo it. Failed for
            # good, as another try would return the same.
            reason = f"unstorable result: {error}"
            self._fail(current, step, attempt, reason, "unknown", "InvalidEvent", final=True)
            return
        # Not appended alone: it goes with the next move (the next step's
        # start), one append for both. Lost in a crash, it costs a retry
        # with the same key, which the service answers as before.
        self._record(current, [succeeded], defer=True)

    def _fail(
        self,
        current: SagaState,
        step: Step,
        attempt: int,
        error: str,
        outcome: T.Outcome,
        error_type: str,
        message: str | None = None,
        *,
        final: bool,
    ) -> bool:
        """Record a failed try of `step` (the saga's failure with it, if `final`): `error`
        as the try's, `error_type` and `message` (`error` if None) as its compensations
        are told."""
        failure = StepFailure(step.name, error_type, error if message is None else message)
        events = T.step_failed(step.name, attempt, error, outcome, final, failure, current.subject)
        return self._record(current, events, defer=True)

    def _park(self, current: SagaState, step: Step, attempt: int, error: Exception) -> None:
        """Park the saga on what `step` raised undeclared: a bug, not a business failure."""
        traceback = bare_traceback(error)
        kind = type_name(error)
        parked = T.parked_on_bug(step.name, attempt, kind, str(error), traceback, current.subject)
        if self._record(current, [parked]):
            # The message stays out of the log: it may quote personal data (it is
            # sealed in the saga's stream); the traceback says where it was raised.
            log.error(
                "saga %s parked: step %r raised %s, which it does not declare in fails_on or "
                "retry_on; retry it after a fix (eventcraft sagas retry) or compensate it "
                "(eventcraft sagas compensate)\n%s",
                current.stream_id,
                step.name,
                kind,
                traceback.rstrip(),
                extra=telemetry.log_fields(current),
            )

    def _backward(self, saga: Saga, current: SagaState) -> None:
        cut_short = current.cut_short
        if cut_short is not None and not isinstance(saga.step(cut_short.step).action, Awaiting):
            # Its owner is done with it or presumed dead (`advance` waits out its lease
            # first); its outcome was to go with the owner's next move, which the
            # failure refused. It may have taken effect: undone like a try that timed out.
            reason = current.failure or "the saga failed"
            self._record(
                current,
                [T.step_cut_short(cut_short.step, cut_short.attempt, reason, current.subject)],
                defer=True,
            )
        names = [s.name for s in saga.steps]
        start = [] if saga.start is None else [START]
        on_failure = {s.name for s in saga.steps if s.compensate_on_failure}
        done = current.to_compensate(start + names, on_failure=on_failure, always=set(start))
        undo = [n for n in done if saga.step(n).compensation is not None]
        if not undo:
            compensated = T.compensated(current.failure, current.failure_clear, current.subject)
            self._record(current, [compensated])
            return
        step = saga.step(undo[0])
        attempt = current.compensation_attempts.get(step.name, 0) + 1
        failures = current.compensation_failures.get(step.name, 0)
        policy = step.compensation_retry
        if current.lost_tries(step.name, compensating=True) >= MAX_CRASHES:
            error = f"{MAX_CRASHES} tries of the compensation of {step.name} ended with no outcome"
            self._record(current, [T.parked(step.name, error)])
            return
        began = time.monotonic()
        lease_until = self._lease_until(step.timeout or self.lease)
        started = T.compensation_started(step.name, attempt, self.owner, lease_until)
        if not self._record(current, [started]):
            return
        context = self._context(current, step, attempt, compensating=True)
        assert step.compensation is not None
        try:
            with telemetry.step_try(current, context):
                call(step.compensation, current.data, context, _left(step.timeout, began))
        except EventLoopRunning:
            raise
        except Exception as error:
            final = failures + 1 >= policy.attempts
            failed = T.compensation_failed(
                step.name, attempt, repr(error), type_name(error), final, current.subject
            )
            if self._record(current, failed, defer=True) and not final:
                time.sleep(policy.delay(failures + 1))
            return
        self._record(current, [T.compensation_succeeded(step.name)], defer=True)

    # --- plumbing -------------------------------------------------------------------

    def _lease_until(self, seconds: float) -> float:
        """When a lease of `seconds` taken now ends, in the store's database's time.

        Leases are judged by that one clock (`_held`), as every other lease is:
        judged by its own `clock`, an orchestrator running ahead would find lapsed
        a lease its holder keeps, and run the step a second time. Read before
        the append that records the lease, so the end it records is no later
        than the holder's own reckoning (its try's cut-off, on its monotonic
        clock) says.
        """
        return self.store.now().timestamp() + seconds

    def _held(self, flight: InFlight) -> bool:
        """Whether another's lease on the try under way still holds, by the database's time."""
        return flight.lease_until > self.store.now().timestamp()

    def _context(
        self, current: SagaState, step: Step, attempt: int, *, compensating: bool
    ) -> StepContext:
        failure = current.failed_with if compensating else None
        return StepContext(
            saga_id=current.saga_id,
            step=step.name,
            attempt=attempt,
            idempotency_key=idempotency_key(current.stream_id, step.name, compensating),
            correlation_id=current.correlation_id,
            results=dict(current.results),
            compensating=compensating,
            failure=failure,
            tenant=self.tenant,
        )

    def definition(self, name: str) -> Saga:
        """The definition of saga `name`; `UnknownSaga` if this orchestrator lacks it."""
        saga = self.sagas.get(name)
        if saga is None:
            raise UnknownSaga(f"this orchestrator does not run saga {name!r}")
        return saga

    def _runs(self, stream: str) -> bool:
        return saga_of_stream(stream)[0] in self.sagas


def _start_data(
    data: Any, subject: str | None, personal: Mapping[str, Any] | None, where: str
) -> Part:
    """A start's data and personal fields, as the saga records them."""
    if not isinstance(data, dict | BaseModel):
        raise SagaDefinitionError(
            f"saga data is a JSON-encodable dict or a pydantic model, not {data!r}"
        )
    if subject is not None:
        try:
            check_subject(f"{where}: subject=", subject)
        except InvalidEvent as error:
            raise SagaDefinitionError(str(error)) from None
    if personal is None:
        return part_of(data, subject, where)
    if not isinstance(personal, Mapping):
        raise SagaDefinitionError(f"{where}: personal= is a dict of fields, not {personal!r}")
    if subject is None:
        raise SagaDefinitionError(
            f"{where}: personal= needs subject=, the id of the person whose data it is"
        )
    try:
        return given_part(data, personal, subject, where)
    except InvalidEvent as error:
        raise SagaDefinitionError(str(error)) from None


def _left(timeout: float | None, began: float) -> float | None:
    """What is left of `timeout` seconds counted from `began` (monotonic): a try gives up
    no later than the lease recorded after `began` ends."""
    if timeout is None:
        return None
    return max(timeout - (time.monotonic() - began), 0.001)


class _Waiting(Exception):
    """The instance rests until a signal or its deadline."""
