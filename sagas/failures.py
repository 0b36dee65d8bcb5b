"""How a step fails, and what is kept of it.

A step fails in one of three ways, which its declaration tells apart:

- a business failure: an exception type it declares in `fails_on`, or a
  `Failure` it returns. The saga compensates; each compensation is told why
  (`StepContext.failure`, a `StepFailure`);
- a transient error: a type it declares in `retry_on`, tried again with its
  retry policy's back-off, and a business failure once no try is left;
- anything else: a bug in the step's code. Undoing a customer's order for
  it would hide the bug behind a business outcome, so the saga parks, its
  `Bug` (type, message, traceback) kept in its stream and logged at ERROR,
  until it is retried after a fix or compensated on an operator's word.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["fail", "retry", "bug"]
"""What an exception raised by a step is, by the step's declaration."""


@dataclass(frozen=True)
class Failure:
    """What an action returns to fail its step as a business failure: the saga compensates.

    ``return Failure("card declined")`` is the same as raising an exception the
    step declares in `fails_on`.

    Example::

        from eventcraft.eventstore import EventStore
        from eventcraft.sagas import Failure, Orchestrator, Saga, Step

        stock = {"tea": 10}

        def reserve(data, context):
            stock["tea"] -= 1

        def release(data, context):
            stock["tea"] += 1

        def charge(data, context):
            if data["cents"] > 100_000:
                return Failure("card declined")  # the bank said no
            return {"charged": data["cents"]}

        checkout = Saga("checkout", [Step("reserve", reserve, release), Step("charge", charge)])
        store = EventStore.open("sqlite:///shop.db")
        orchestrator = Orchestrator(store, [checkout])
        orchestrator.start(checkout, {"cents": 250_000}, saga_id="order-1")
        orchestrator.run_pending()
        state = orchestrator.state("checkout", "order-1")
        assert state.status == "compensated" and stock == {"tea": 10}
        assert state.failure == "step charge failed: Failure('card declined')"
        store.close()
    """

    reason: str
    """Why, as the saga's failure and each compensation's `context.failure.message` say."""


@dataclass(frozen=True)
class StepFailure:
    """Why a saga failed, as its compensations are told (`StepContext.failure`).

    Example::

        from eventcraft.eventstore import EventStore
        from eventcraft.sagas import Orchestrator, Saga, Step, StepFailure

        class CourierRefused(Exception):
            "The courier says no."

        told = []

        def reserve(data, context): ...

        def release(data, context):
            told.append(context.failure)  # a warehouse may log why it takes the item back

        def ship(data, context):
            raise CourierRefused("the courier does not carry pianos")

        steps = [Step("reserve", reserve, release), Step("ship", ship, fails_on=(CourierRefused,))]
        fulfilment = Saga("fulfilment", steps)
        store = EventStore.open("sqlite:///shop.db")
        orchestrator = Orchestrator(store, [fulfilment])
        orchestrator.start(fulfilment, {"sku": "piano"}, saga_id="order-1")
        orchestrator.run_pending()
        said = "the courier does not carry pianos"
        assert told == [StepFailure(step="ship", error_type="CourierRefused", message=said)]
        store.close()
    """

    step: str
    """The step that failed (or was under way when the saga timed out)."""
    error_type: str
    """The exception's type name (`Failure` for a returned one, `StepTimedOut`, ...)."""
    message: str
    """What it said (`FORGOTTEN` once the saga's subject is forgotten)."""


@dataclass(frozen=True)
class Bug:
    """What a step raised that it did not declare: the saga parked on it.

    Example::

        from eventcraft.eventstore import EventStore
        from eventcraft.sagas import Orchestrator, Saga, Step

        def ship(data, context):
            return {"parcel": data["parcel_id"]}  # a bug: the saga's data has no parcel_id

        fulfilment = Saga("fulfilment", [Step("ship", ship)])
        store = EventStore.open("sqlite:///shop.db")
        orchestrator = Orchestrator(store, [fulfilment])
        orchestrator.start(fulfilment, {"sku": "tea"}, saga_id="order-1")
        orchestrator.run_pending()  # logs the bug at ERROR, with its traceback
        state = orchestrator.state("fulfilment", "order-1")
        assert state.status == "parked"  # nothing undone: it waits for a fix, then a retry
        bug = state.bug
        assert (bug.step, bug.attempt, bug.error_type) == ("ship", 1, "KeyError")
        assert bug.message == "'parcel_id'" and "in ship" in bug.traceback
        store.close()
    """

    step: str
    attempt: int
    error_type: str
    """The exception's type name (its traceback's last line qualifies it)."""
    message: str
    """What it said: sealed under the saga's subject when it has one, `FORGOTTEN` once
    the subject is forgotten."""
    traceback: str
    """Where it was raised: frames and exception types, no message (`bare_traceback`)."""


def type_name(error: BaseException) -> str:
    """`error`'s type as a failure names it: its class's name (the traceback qualifies it)."""
    return type(error).__qualname__
