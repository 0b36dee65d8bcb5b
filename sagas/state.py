"""A saga instance's state, rebuilt from the transitions in its stream.

Each transition is an event appended before the orchestrator acts on it,
so the stream alone says what was done, what was under way when a process
died, and what is left: `evolve` is the only place that knows how.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from eventcraft.eventstore import NewEvent, RecordedEvent

from .failures import Bug, StepFailure
from .personal import read_part, read_text

STARTED = "SagaStarted"
STEP_STARTED = "StepStarted"
STEP_SUCCEEDED = "StepSucceeded"
STEP_FAILED = "StepFailed"
FAILED = "SagaFailed"
COMPENSATION_STARTED = "CompensationStarted"
COMPENSATION_SUCCEEDED = "CompensationSucceeded"
COMPENSATION_FAILED = "CompensationFailed"
COMPLETED = "SagaCompleted"
COMPENSATED = "SagaCompensated"
PARKED = "SagaParked"
RETRIED = "SagaRetried"
RESOLVED = "SagaResolved"
COMPENSATION_ORDERED = "SagaCompensationOrdered"
SIGNALLED = "SagaSignalled"

FINISHED = frozenset({"completed", "compensated", "resolved"})
"""Statuses no orchestrator acts on again."""


@dataclass(frozen=True)
class InFlight:
    """An action or compensation recorded as started and not yet as ended.

    Example::

        import time

        from eventcraft.eventstore import EventStore
        from eventcraft.sagas import Orchestrator, Saga, Step

        seen = []

        def ship(data, context):  # what another orchestrator would see meanwhile:
            seen.append(orchestrator.state("fulfilment", context.saga_id).in_flight)

        fulfilment = Saga("fulfilment", [Step("ship", ship)])
        store = EventStore.open("sqlite:///shop.db")
        orchestrator = Orchestrator(store, [fulfilment], lease=30)
        orchestrator.start(fulfilment, {"sku": "tea"}, saga_id="order-1")
        orchestrator.run_pending()
        (flight,) = seen
        assert (flight.step, flight.attempt, flight.compensating) == ("ship", 1, False)
        assert flight.owner == orchestrator.owner  # no other takes it over until:
        assert time.time() < flight.lease_until <= time.time() + 30
        assert orchestrator.state("fulfilment", "order-1").in_flight is None  # ended
        store.close()
    """

    step: str
    attempt: int
    owner: str
    lease_until: float
    """Until when its owner may still be running it; after, another may retry it."""
    deadline: float | None
    """When this try times out (the step's timeout from its start)."""
    compensating: bool


@dataclass
class SagaState:
    """One saga instance as its stream's events leave it: status, data, results, failures.

    Example::

        from eventcraft.eventstore import EventStore
        from eventcraft.sagas import Orchestrator, Saga, SagaState, Step, wait_for

        def reserve(data, context):
            return {"reservation": context.idempotency_key}

        steps = [Step("reserve", reserve), wait_for("payment", "OrderPaid")]
        fulfilment = Saga("fulfilment", steps)
        store = EventStore.open("sqlite:///shop.db")
        orchestrator = Orchestrator(store, [fulfilment])
        orchestrator.start(fulfilment, {"sku": "tea"}, saga_id="order-1")
        orchestrator.run_pending()
        state: SagaState = orchestrator.state("fulfilment", "order-1")
        assert (state.status, state.finished, state.data) == ("running", False, {"sku": "tea"})
        assert state.succeeded == ["reserve"] and state.in_flight.step == "payment"
        assert state.results == {"reserve": {"reservation": "saga-fulfilment:order-1/reserve"}}
        store.close()
    """

    name: str
    saga_id: str
    stream_id: str
    version: int = 0
    """The stream's version this state was built from (the next append expects it)."""
    status: str = "running"
    """running, compensating, completed, compensated, parked or resolved."""
    data: dict[str, Any] = field(default_factory=dict)
    """The start data, its personal fields in it (`FORGOTTEN` once their subject is)."""
    subject: str | None = None
    """Whose the saga's personal data is: its start's `subject=` (None: no one's)."""
    correlation_id: str = ""
    deadline: float | None = None
    """When the whole saga times out, if it has a timeout."""
    results: dict[str, Any] = field(default_factory=dict)
    succeeded: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    """Steps whose last try timed out: they may have taken effect, so they are compensated."""
    compensated: list[str] = field(default_factory=list)
    attempts: dict[str, int] = field(default_factory=dict)
    """The last try's number, by step: tries cut short by a crash count too."""
    failures: dict[str, int] = field(default_factory=dict)
    """Tries that ended in a recorded failure, by step: what the retry policy counts."""
    compensation_attempts: dict[str, int] = field(default_factory=dict)
    compensation_failures: dict[str, int] = field(default_factory=dict)
    lost: dict[str, int] = field(default_factory=dict)
    """Tries that ended with no outcome (their process died), by `try_key`."""
    in_flight: InFlight | None = None
    failure: str | None = None
    """Why it is compensating (or was compensated): an error's text reads `FORGOTTEN`,
    after its type, once the saga's subject is forgotten."""
    failure_clear: str | None = None
    """What of `failure` is kept in the clear (all of it, in a saga of no one's)."""
    parked_because: str | None = None
    bug: Bug | None = None
    """What a step raised that it did not declare, while the saga is parked on it."""
    resume: str = "compensating"
    """The status a retry of the parked instance returns it to."""
    failed_with: StepFailure | None = None
    """Why it is compensating, as its compensations are told (None: cancelled, or
    compensated on an operator's word)."""
    failed_step: str | None = None
    """The step whose action failed for good, or parked the saga as a bug."""
    signals: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The data of the latest event of each type signalled into the instance."""
    signal_subjects: dict[str, dict[str, str]] = field(default_factory=dict)
    """The subject of each personal field of each signal's data, by event type: a copy of
    the data (the waiting step's result) is sealed under the same ones."""
    stale: bool = False
    """Another orchestrator appended since this state was read: read it again."""
    unsaved: list[NewEvent] = field(default_factory=list)
    """Transitions already folded in here but not yet appended (they go with the next)."""
    started_in: dict[str, Any] | None = None
    """The metadata of its first event: the trace context it was started in (telemetry)."""

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    def evolve(self, event: RecordedEvent) -> None:
        d = event.data
        self.version = event.version
        kind = event.type
        if kind == STARTED:
            self.data = read_part(d, "data").merged()
            self.subject = d.get("subject")
            self.correlation_id = d["correlation_id"]
            self.deadline = d["deadline"]
            self.started_in = event.metadata
        elif kind in (STEP_STARTED, COMPENSATION_STARTED):
            compensating = kind == COMPENSATION_STARTED
            tries = self.compensation_attempts if compensating else self.attempts
            tries[d["step"]] = d["attempt"]
            if self.in_flight is not None:  # the try before this one never ended
                key = try_key(self.in_flight.step, self.in_flight.compensating)
                self.lost[key] = self.lost.get(key, 0) + 1
            self.in_flight = InFlight(
                d["step"],
                d["attempt"],
                d["owner"],
                d["lease_until"],
                d.get("deadline"),
                compensating,
            )
        elif kind == STEP_SUCCEEDED:
            self.in_flight = None
            self.succeeded.append(d["step"])
            self.results[d["step"]] = read_part(d, "result").merged()
        elif kind == STEP_FAILED:
            self.in_flight = None
            self.failures[d["step"]] = self.failures.get(d["step"], 0) + 1
            if d["final"]:
                self.failed_step = d["step"]
            if d["final"] and d["outcome"] == "unknown":
                self.unknown.append(d["step"])
        elif kind == FAILED:
            self.status, self.failure = "compensating", read_text(d, "reason")
            self.failure_clear = d["reason"]
            failure = read_part(d, "failure").merged()
            self.failed_with = None if failure is None else StepFailure(**failure)
        elif kind == COMPENSATION_SUCCEEDED:
            self.in_flight = None
            self.compensated.append(d["step"])
        elif kind == COMPENSATION_FAILED:
            self.in_flight = None
            self.compensation_failures[d["step"]] = self.compensation_failures.get(d["step"], 0) + 1
        elif kind == COMPLETED:
            self.status = "completed"
        elif kind == COMPENSATED:
            self.status = "compensated"
        elif kind == PARKED:
            self.resume = "running" if self.status == "running" else "compensating"
            self.status, self.parked_because = "parked", read_text(d, "error")
            self.in_flight = None
            bug = read_part(d, "bug").merged()
            if bug is not None:
                self.failed_step = d["step"]
                self.bug = Bug(d["step"], d["attempt"], **bug)
        elif kind == RETRIED:
            self.status, self.parked_because, self.bug = self.resume, None, None
            if self.resume == "running":  # a bug, fixed: its step's tries count afresh
                self.failures.clear()
                self.failed_step = None
                self.lost = {k: n for k, n in self.lost.items() if k.endswith(_COMPENSATION)}
            self.compensation_failures.clear()
            self.lost = {k: n for k, n in self.lost.items() if not k.endswith(_COMPENSATION)}
        elif kind == COMPENSATION_ORDERED:
            self.status, self.parked_because, self.bug = "compensating", None, None
            self.failure = self.failure_clear = f"compensation ordered: {d['reason']}"
            self.failed_with = None
            self.compensation_failures.clear()
            self.lost = {k: n for k, n in self.lost.items() if not k.endswith(_COMPENSATION)}
        elif kind == RESOLVED:
            self.status = "resolved"
        elif kind == SIGNALLED:
            part = read_part(d, "data")
            self.signals[d["type"]] = part.merged()
            self.signal_subjects[d["type"]] = {k: owner for k, (owner, _) in part.personal.items()}

    def lost_tries(self, step: str, *, compensating: bool) -> int:
        """Tries of `step` that died with their process, the one under way included."""
        flight = self.in_flight
        under_way = flight is not None and (flight.step, flight.compensating) == (
            step,
            compensating,
        )
        return self.lost.get(try_key(step, compensating), 0) + under_way

    @property
    def cut_short(self) -> InFlight | None:
        """The action under way when the saga failed, if any: cancelled in the midst of a
        try, whose outcome (appended with the owner's next move) can no longer be recorded."""
        flight = self.in_flight
        if self.status == "compensating" and flight is not None and not flight.compensating:
            return flight
        return None

    def to_compensate(
        self, steps: list[str], *, on_failure: set[str], always: set[str]
    ) -> list[str]:
        """Steps that may have taken effect and are not yet undone, last first.

        `on_failure`: the steps compensated when their own action failed too;
        `always`: those undone whenever the saga is (its start's compensation).
        """
        done = set(self.succeeded) | set(self.unknown) | always
        if self.failed_step in on_failure:
            done.add(self.failed_step)
        return [s for s in reversed(steps) if s in done and s not in self.compensated]


_COMPENSATION = "/compensation"


def try_key(step: str, compensating: bool) -> str:
    return step + _COMPENSATION if compensating else step


def idempotency_key(stream_id: str, step: str, compensating: bool) -> str:
    """The idempotency key every try of `step` (or of its compensation) of the instance
    whose stream is `stream_id` is given (`StepContext.idempotency_key`).

    Example::

        from eventcraft.eventstore import EventStore
        from eventcraft.sagas import Orchestrator, Saga, Step, idempotency_key, stream_of

        reservations = {}  # the warehouse's, by idempotency key

        def reserve(data, context):
            reservations.setdefault(context.idempotency_key, data["sku"])  # once per key

        fulfilment = Saga("fulfilment", [Step("reserve", reserve)])
        store = EventStore.open("sqlite:///shop.db")
        orchestrator = Orchestrator(store, [fulfilment])
        orchestrator.start(fulfilment, {"sku": "tea"}, saga_id="order-1")
        orchestrator.run_pending()
        # An operator looks the reservation of order-1 up in the warehouse:
        key = idempotency_key(stream_of("fulfilment", "order-1"), "reserve", False)
        assert reservations[key] == "tea" and key == "saga-fulfilment:order-1/reserve"
        undo = idempotency_key(stream_of("fulfilment", "order-1"), "reserve", True)
        assert undo == "saga-fulfilment:order-1/reserve/compensation"  # its release's
        store.close()
    """
    return f"{stream_id}/{try_key(step, compensating)}"
