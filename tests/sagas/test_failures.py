"""A bug is not a business failure. A step's declared failures (`fails_on`, or a `Failure`
it returns) compensate the saga; its transient errors (`retry_on`) are tried again with
back-off; anything else is a bug in our code: the saga parks with its traceback, is
logged at ERROR, and waits for a fix (`retry`) or an operator's word (`compensate`)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from eventcraft.eventstore import FORGOTTEN, EventStore
from eventcraft.sagas import (
    Failure,
    Orchestrator,
    RetryPolicy,
    Saga,
    SagaNotParked,
    Step,
    StepContext,
    StepFailure,
    wait_for,
)
from eventcraft.sagas import state as S

SUBJECT = "customer-f1"
EMAIL = "ada.failure@analytical.example"


class PaymentDeclined(Exception):
    """The business says no: the saga is undone."""


class Shop:
    """Services that record what they did, and fail as a test tells them to."""

    def __init__(self, charge_raises: BaseException | None = None) -> None:
        self.calls: list[str] = []
        self.charge_raises = charge_raises
        self.failures: list[StepFailure | None] = []

    def reserve(self, data: dict[str, Any], context: StepContext) -> dict[str, str]:
        self.calls.append(f"reserve:{context.idempotency_key}")
        return {"reserved": "yes"}

    def release(self, data: dict[str, Any], context: StepContext) -> None:
        self.calls.append("release")
        self.failures.append(context.failure)

    def charge(self, data: dict[str, Any], context: StepContext) -> Any:
        self.calls.append(f"charge:{context.idempotency_key}")
        if self.charge_raises is not None:
            raise self.charge_raises
        return {"charged": "yes"}

    def refund(self, data: dict[str, Any], context: StepContext) -> None:
        self.calls.append("refund")
        self.failures.append(context.failure)

    def saga(self, **charge: Any) -> Saga:
        return Saga(
            "checkout",
            [
                Step("reserve", self.reserve, self.release),
                Step("charge", self.charge, self.refund, **charge),
            ],
        )


def _parked_event(store: EventStore, saga_id: str) -> dict[str, Any]:
    (event,) = [e for e in store.read_stream(f"saga-checkout:{saga_id}") if e.type == S.PARKED]
    return dict(event.data)


def test_an_unexpected_exception_in_a_step_parks_the_saga_with_its_traceback_and_undoes_nothing(
    store: EventStore, caplog: pytest.LogCaptureFixture
) -> None:
    shop = Shop(KeyError("x"))
    orchestrator = Orchestrator(store, [shop.saga(fails_on=(PaymentDeclined,))])
    orchestrator.start(orchestrator.definition("checkout"), {}, saga_id="1")
    with caplog.at_level(logging.INFO, logger="eventcraft.sagas"):
        assert orchestrator.run_pending() == 1
    state = orchestrator.state("checkout", "1")
    assert state.status == "parked"
    assert "release" not in shop.calls and "refund" not in shop.calls
    bug = state.bug
    assert bug is not None
    assert (bug.step, bug.error_type, bug.message) == ("charge", "KeyError", "'x'")
    assert "Traceback (most recent call last)" in bug.traceback
    assert "in charge" in bug.traceback and bug.traceback.rstrip().endswith("KeyError")
    (record,) = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert "checkout" in record.getMessage() and "KeyError" in record.getMessage()
    assert "in charge" in record.getMessage() and "'x'" not in record.getMessage()


def test_a_declared_business_failure_compensates_at_once(store: EventStore) -> None:
    shop = Shop(PaymentDeclined("card declined"))
    orchestrator = Orchestrator(store, [shop.saga(fails_on=(PaymentDeclined,))])
    orchestrator.start(orchestrator.definition("checkout"), {}, saga_id="2")
    assert orchestrator.run_pending() == 0
    state = orchestrator.state("checkout", "2")
    assert state.status == "compensated" and "card declined" in (state.failure or "")
    charged = ["reserve:saga-checkout:2/reserve", "charge:saga-checkout:2/charge"]
    assert shop.calls == [*charged, "release"]


def test_a_failure_a_step_returns_compensates_as_a_declared_one(store: EventStore) -> None:
    shop = Shop()
    saga = Saga(
        "checkout",
        [
            Step("reserve", shop.reserve, shop.release),
            Step("charge", lambda data, context: Failure("card declined")),
        ],
    )
    orchestrator = Orchestrator(store, [saga])
    orchestrator.start(saga, {}, saga_id="3")
    orchestrator.run_pending()
    state = orchestrator.state("checkout", "3")
    assert state.status == "compensated" and "card declined" in (state.failure or "")
    assert shop.failures == [StepFailure("charge", "Failure", "card declined")]


def test_a_transient_error_a_step_marks_retryable_is_tried_again(store: EventStore) -> None:
    shop = Shop(TimeoutError("payments slow"))
    tries: list[int] = []

    def charge(data: dict[str, Any], context: StepContext) -> None:
        tries.append(context.attempt)
        if context.attempt == 1:
            raise TimeoutError("payments slow")

    saga = Saga(
        "checkout",
        [
            Step("reserve", shop.reserve, shop.release),
            Step("charge", charge, retry=RetryPolicy(3, 0.01), retry_on=(TimeoutError,)),
        ],
    )
    orchestrator = Orchestrator(store, [saga])
    orchestrator.start(saga, {}, saga_id="4")
    assert orchestrator.run_pending() == 0
    assert orchestrator.state("checkout", "4").status == "completed"
    assert tries == [1, 2]


def test_a_parked_bug_retried_after_the_fix_runs_the_step_again_with_the_same_key(
    store: EventStore,
) -> None:
    shop = Shop(KeyError("x"))
    orchestrator = Orchestrator(store, [shop.saga()])
    orchestrator.start(orchestrator.definition("checkout"), {}, saga_id="5")
    orchestrator.run_pending()
    shop.charge_raises = None  # the fix is deployed
    assert orchestrator.retry("checkout", "5").status == "completed"
    charges = [c for c in shop.calls if c.startswith("charge")]
    assert charges == ["charge:saga-checkout:5/charge"] * 2
    assert orchestrator.state("checkout", "5").bug is None


def test_an_operator_compensates_a_parked_saga_and_its_compensations_see_no_failure(
    store: EventStore,
) -> None:
    shop = Shop(KeyError("x"))
    orchestrator = Orchestrator(store, [shop.saga()])
    orchestrator.start(orchestrator.definition("checkout"), {}, saga_id="6")
    orchestrator.run_pending()
    assert orchestrator.compensate("checkout", "6", "the customer withdrew").status == (
        "compensated"
    )
    assert shop.calls[-1] == "release" and "refund" not in shop.calls
    assert shop.failures == [None]
    assert "the customer withdrew" in (orchestrator.state("checkout", "6").failure or "")
    with pytest.raises(SagaNotParked):
        orchestrator.compensate("checkout", "6", "again")


def test_the_message_of_a_bug_is_sealed_under_the_sagas_subject(store: EventStore) -> None:
    shop = Shop(KeyError(EMAIL))
    orchestrator = Orchestrator(store, [shop.saga()])
    orchestrator.start(orchestrator.definition("checkout"), {}, saga_id="7", subject=SUBJECT)
    orchestrator.run_pending()
    bug = orchestrator.state("checkout", "7").bug
    assert bug is not None and EMAIL in bug.message and EMAIL not in bug.traceback
    store.forget(SUBJECT)
    bug = orchestrator.state("checkout", "7").bug
    assert bug is not None and bug.message == FORGOTTEN and bug.error_type == "KeyError"
    assert EMAIL not in str(_parked_event(store, "7"))


def test_a_failing_steps_compensation_runs_only_when_it_says_so(store: EventStore) -> None:
    declined = PaymentDeclined("card declined")
    plain, partial = Shop(declined), Shop(declined)
    for saga_id, shop, flag in (("8", plain, False), ("9", partial, True)):
        saga = shop.saga(fails_on=(PaymentDeclined,), compensate_on_failure=flag)
        orchestrator = Orchestrator(store, [saga])
        orchestrator.start(saga, {}, saga_id=saga_id)
        orchestrator.run_pending()
        assert orchestrator.state("checkout", saga_id).status == "compensated"
    assert [c for c in plain.calls if "charge" not in c][1:] == ["release"]
    assert [c for c in partial.calls if "charge" not in c][1:] == ["refund", "release"]


def test_a_compensation_is_told_why_the_saga_failed(store: EventStore) -> None:
    shop = Shop(PaymentDeclined("card declined"))
    orchestrator = Orchestrator(
        store, [shop.saga(fails_on=(PaymentDeclined,), compensate_on_failure=True)]
    )
    orchestrator.start(orchestrator.definition("checkout"), {}, saga_id="10")
    orchestrator.run_pending()
    expected = StepFailure("charge", "PaymentDeclined", "card declined")
    assert shop.failures == [expected, expected]


def test_a_cancelled_sagas_compensations_are_told_it_was_no_failure(store: EventStore) -> None:
    shop = Shop()
    saga = Saga("checkout", [Step("reserve", shop.reserve, shop.release), wait_for("paid", "Paid")])
    orchestrator = Orchestrator(store, [saga])
    orchestrator.start(saga, {}, saga_id="11")
    assert orchestrator.run_pending() == 1
    orchestrator.cancel("checkout", "11", "the customer withdrew")
    orchestrator.run_pending()
    assert orchestrator.state("checkout", "11").status == "compensated"
    assert shop.calls[-1] == "release" and shop.failures == [None]


def test_a_sagas_own_compensation_undoes_its_start_last(store: EventStore) -> None:
    shop = Shop(PaymentDeclined("card declined"))
    undone: list[tuple[str, StepFailure | None]] = []

    def unstart(data: dict[str, Any], context: StepContext) -> None:
        undone.append((data["order"], context.failure))

    saga = Saga(
        "checkout",
        [
            Step("reserve", shop.reserve, shop.release),
            Step("charge", shop.charge, fails_on=(PaymentDeclined,)),
        ],
        compensation=unstart,
    )
    orchestrator = Orchestrator(store, [saga])
    orchestrator.start(saga, {"order": "12"}, saga_id="12")
    orchestrator.run_pending()
    assert orchestrator.state("checkout", "12").status == "compensated"
    assert shop.calls[-1] == "release"
    assert undone == [("12", StepFailure("charge", "PaymentDeclined", "card declined"))]
    compensated = [
        e.data["step"]
        for e in store.read_stream("saga-checkout:12")
        if e.type == S.COMPENSATION_SUCCEEDED
    ]
    assert compensated == ["reserve", "saga.start"]
