"""What a service developer declares: a saga's durable name and its ordered steps."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .context import StepContext
from .errors import SagaDefinitionError
from .failures import Kind

Action = Callable[[dict[str, Any], StepContext], Any | Awaitable[Any]]
"""`action(data, context) -> result`: plain or async; the result must be JSON-encodable.

Example::

    from eventcraft.eventstore import EventStore
    from eventcraft.sagas import Action, Orchestrator, Saga, Step

    stock = {"tea": 10}

    def take(amount: int) -> Action:  # an action, made for each use
        def action(data, context):
            stock[data["sku"]] -= amount
            return {"left": stock[data["sku"]]}  # its result: JSON, kept in the saga's stream

        return action

    fulfilment = Saga("fulfilment", [Step("reserve", take(1), compensation=take(-1))])
    store = EventStore.open("sqlite:///shop.db")
    orchestrator = Orchestrator(store, [fulfilment])
    orchestrator.start(fulfilment, {"sku": "tea"}, saga_id="order-1")
    orchestrator.run_pending()
    assert orchestrator.state("fulfilment", "order-1").results == {"reserve": {"left": 9}}
    store.close()
"""

_NAME = re.compile(r"[A-Za-z0-9_.]{1,80}")


@dataclass(frozen=True)
class RetryPolicy:
    """How often a failing action or compensation is tried, and how long to wait between.

    Example::

        from eventcraft.eventstore import EventStore
        from eventcraft.sagas import Orchestrator, RetryPolicy, Saga, Step

        tries = []

        def charge(data, context):
            tries.append(context.attempt)
            if len(tries) < 3:
                raise ConnectionError("the payment service is restarting")
            return {"charged": data["cents"]}

        policy = RetryPolicy(attempts=3, backoff=0.01)  # three tries, 0.01 s then 0.02 s apart
        assert (policy.delay(1), policy.delay(2)) == (0.01, 0.02)
        charging = Step("charge", charge, retry=policy, retry_on=(ConnectionError,))
        checkout = Saga("checkout", [charging])
        store = EventStore.open("sqlite:///shop.db")
        orchestrator = Orchestrator(store, [checkout])
        orchestrator.start(checkout, {"cents": 1200}, saga_id="order-1")
        orchestrator.run_pending()
        assert orchestrator.state("checkout", "order-1").status == "completed"
        assert tries == [1, 2, 3]
        store.close()
    """

    attempts: int = 1
    """Tries in all, the first included."""
    backoff: float = 0.0
    """Seconds before the second try, doubled before each try after it."""

    def __post_init__(self) -> None:
        if (
            isinstance(self.attempts, bool)
            or not isinstance(self.attempts, int)
            or self.attempts < 1
        ):
            raise SagaDefinitionError(f"attempts must be an int >= 1, not {self.attempts!r}")
        if not isinstance(self.backoff, int | float) or self.backoff < 0:
            raise SagaDefinitionError(f"backoff must be seconds >= 0, not {self.backoff!r}")

    def delay(self, attempt: int) -> float:
        """Seconds to wait before try `attempt + 1`."""
        return float(self.backoff * 2 ** (attempt - 1))


def _always(error: BaseException) -> bool:
    return True


@dataclass(frozen=True)
class Step:
    """One step: an action, and the compensation that undoes it.

    A step without a compensation has nothing to undo (a check, a read).
    What the action raises is told apart by its type (`failures.py`): one of
    `fails_on` (or a returned `Failure`) is a business failure, and the saga
    compensates; one of `retry_on` is transient, tried again by `retry`'s
    policy (while `retryable(error)` agrees), a business failure once no try
    is left; anything else is a bug, and the saga parks with its traceback.
    A `timeout` bounds each try, and a try that runs past it counts as failed
    with an unknown outcome, so the step is compensated too.

    A failed step's own compensation is not called: its action is taken to
    have done nothing. `compensate_on_failure=True` calls it too (first),
    for an action that may have done part of its work before it failed.

    Example::

        from eventcraft.eventstore import EventStore
        from eventcraft.sagas import Orchestrator, Saga, Step

        stock = {"piano": 1}

        class CourierRefused(Exception):
            "The courier says no: a business answer, not an outage."

        def reserve(data, context):
            stock[data["sku"]] -= 1

        def release(data, context):
            stock[data["sku"]] += 1

        def ship(data, context):
            raise CourierRefused(f"the courier does not carry a {data['sku']}")

        fulfilment = Saga("fulfilment", [
            Step("reserve", reserve, release),  # an action and its compensation
            Step("ship", ship, fails_on=(CourierRefused,)),
        ])
        store = EventStore.open("sqlite:///shop.db")
        orchestrator = Orchestrator(store, [fulfilment])
        orchestrator.start(fulfilment, {"sku": "piano"}, saga_id="order-1")
        orchestrator.run_pending()
        state = orchestrator.state("fulfilment", "order-1")
        assert (state.status, state.compensated) == ("compensated", ["reserve"])
        assert stock == {"piano": 1}  # reserved, then released
        store.close()
    """

    name: str
    action: Action
    compensation: Action | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    compensation_retry: RetryPolicy = field(default_factory=lambda: RetryPolicy(3, 0.1))
    timeout: float | None = None
    retryable: Callable[[BaseException], bool] = _always
    """Whether an error of `retry_on` is worth another try."""
    fails_on: tuple[type[BaseException], ...] = ()
    """The exception types that are business failures: the saga compensates at once."""
    retry_on: tuple[type[BaseException], ...] = ()
    """The exception types that are transient: tried again, with back-off, by `retry`."""
    compensate_on_failure: bool = False
    """Whether this step's compensation runs when its own action failed for good."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise SagaDefinitionError(
                f"a step name is 1-80 letters, digits, _ and . characters, not {self.name!r}"
            )
        for what, kinds in (("fails_on", self.fails_on), ("retry_on", self.retry_on)):
            if not isinstance(kinds, tuple) or not all(
                isinstance(k, type) and issubclass(k, BaseException) for k in kinds
            ):
                raise SagaDefinitionError(
                    f"step {self.name!r}: {what} must be a tuple of exception types, not {kinds!r}"
                )
        for what, function in (("action", self.action), ("compensation", self.compensation)):
            if function is not None and not callable(function):
                raise SagaDefinitionError(f"step {self.name!r}: {what} must be callable")
        if self.timeout is not None and (
            not isinstance(self.timeout, int | float) or self.timeout <= 0
        ):
            raise SagaDefinitionError(
                f"step {self.name!r}: timeout must be seconds > 0, not {self.timeout!r}"
            )

    def kind_of(self, error: BaseException) -> Kind:
        """What `error`, raised by the action, is by this step's declaration."""
        if isinstance(error, self.retry_on):
            return "retry"
        if isinstance(error, self.fails_on):
            return "fail"
        return "bug"


@dataclass(frozen=True)
class Awaiting:
    """The action of a step that waits for an event to be signalled into the saga.

    `wait_for` makes such a step.

    Example::

        from eventcraft.sagas import Awaiting, Saga, Step, wait_for

        def reserve(data, context): ...
        def ship(data, context): ...

        fulfilment = Saga("fulfilment", [
            Step("reserve", reserve),
            wait_for("payment", "OrderPaid"),
            Step("ship", ship),
        ])
        waits = {s.name: s.action for s in fulfilment.steps if isinstance(s.action, Awaiting)}
        assert waits == {"payment": Awaiting("OrderPaid")}
        assert waits["payment"].event_type == "OrderPaid"
    """

    event_type: str

    def __call__(self, data: dict[str, Any], context: StepContext) -> Any:
        raise SagaDefinitionError("a waiting step is completed by a signal, never called")


def wait_for(
    name: str, event_type: str, *, timeout: float | None = None, compensation: Action | None = None
) -> Step:
    """A step that completes when `event_type` is signalled into the instance.

    Its result is the signalled event's data. With a `timeout` it fails once
    the time passes with no signal, and the saga compensates.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.sagas import Orchestrator, Saga, Step, wait_for

        parcels = []

        def ship(data, context):
            parcels.append(data["sku"])

        checkout = Saga("checkout", [
            wait_for("payment", "OrderPaid", timeout=7 * 24 * 3600),  # a week, then compensated
            Step("ship", ship),
        ])
        store = EventStore.open("sqlite:///shop.db")
        orchestrator = Orchestrator(store, [checkout])
        orchestrator.start(checkout, {"sku": "tea"}, saga_id="order-1")
        assert orchestrator.run_pending() == 1  # waiting for the payment
        store.append("order-1", [NewEvent("OrderPaid", {"cents": 1200})])
        (paid,) = store.read_stream("order-1")
        orchestrator.signal("checkout", "order-1", paid)  # what a ProcessManager's route does
        assert orchestrator.run_pending() == 0 and parcels == ["tea"]
        assert orchestrator.state("checkout", "order-1").results["payment"] == {"cents": 1200}
        store.close()
    """
    if not isinstance(event_type, str) or not event_type:
        raise SagaDefinitionError(f"step {name!r}: event_type must be a non-empty str")
    return Step(name, Awaiting(event_type), compensation, timeout=timeout)


START = "saga.start"
"""The name the saga's own compensation (`Saga(compensation=)`) is recorded under."""


def _never(data: dict[str, Any], context: StepContext) -> Any:
    raise SagaDefinitionError("the saga's start is not a step to run")


class Saga:
    """A durable name and its steps, run in order; compensated in reverse on failure.

    The name is stored with every instance: renaming a saga orphans the
    instances under the old name. `compensation` undoes the start itself (what
    was done before the saga started, or on its behalf): it runs last whenever
    the saga is compensated, recorded as the compensation of step `saga.start`.

    Example::

        from eventcraft.eventstore import EventStore
        from eventcraft.sagas import Failure, Orchestrator, Saga, Step

        done = []

        def reserve(data, context):
            done.append("reserved")

        def release(data, context):
            done.append("released")

        def charge(data, context):
            return Failure("card declined")

        def reopen_cart(data, context):  # undoes what placing the order did
            done.append("cart reopened")

        checkout = Saga(
            "checkout",  # durable: stored with every instance
            [Step("reserve", reserve, release), Step("charge", charge)],
            compensation=reopen_cart,
        )
        store = EventStore.open("sqlite:///shop.db")
        orchestrator = Orchestrator(store, [checkout])
        orchestrator.start(checkout, {"cart": "c-7"}, saga_id="order-1")
        orchestrator.run_pending()
        assert orchestrator.state("checkout", "order-1").status == "compensated"
        assert done == ["reserved", "released", "cart reopened"]
        store.close()
    """

    def __init__(
        self,
        name: str,
        steps: Sequence[Step],
        *,
        timeout: float | None = None,
        compensation: Action | None = None,
        compensation_retry: RetryPolicy | None = None,
    ) -> None:
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise SagaDefinitionError(
                f"a saga name is 1-80 letters, digits, _ and . characters, not {name!r}"
            )
        steps = tuple(steps)
        if not steps or not all(isinstance(step, Step) for step in steps):
            raise SagaDefinitionError(f"saga {name!r}: steps must be a non-empty list of Step")
        names = [step.name for step in steps]
        if len(set(names)) != len(names):
            raise SagaDefinitionError(f"saga {name!r}: step names must be unique, got {names}")
        if timeout is not None and (not isinstance(timeout, int | float) or timeout <= 0):
            raise SagaDefinitionError(f"saga {name!r}: timeout must be seconds > 0")
        if compensation is not None and START in names:
            raise SagaDefinitionError(
                f"saga {name!r}: {START!r} names the saga's own compensation, not a step"
            )
        self.name = name
        self.steps = steps
        self.timeout = timeout
        self.compensation = compensation
        self.start: Step | None = None
        """The saga's own compensation, as a step that never runs forward."""
        if compensation is not None:
            retry = compensation_retry or RetryPolicy(3, 0.1)
            self.start = Step(START, _never, compensation, compensation_retry=retry)
        self._index = {step.name: index for index, step in enumerate(steps)}

    def step(self, name: str) -> Step:
        if name == START and self.start is not None:
            return self.start
        return self.steps[self._index[name]]

    def index(self, name: str) -> int:
        return self._index[name]

    def __repr__(self) -> str:
        return f"Saga({self.name!r}, steps={[s.name for s in self.steps]})"
