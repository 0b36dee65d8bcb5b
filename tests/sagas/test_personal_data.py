"""A saga's personal data is sealed under its subject's key, as a domain event's is: its
start data, its steps' results and the events signalled into it. Once the subject is
forgotten, none of it is left in the clear in the database (SQLite's files, PostgreSQL's
dump) nor in the Parquet archive of the saga's events, and the saga reads those fields as
`FORGOTTEN`; a saga still running carries on with them forgotten."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any

import pytest
from eventcraft.domain import DomainEvent, EventRegistry
from eventcraft.eventstore import (
    FORGOTTEN,
    AsyncEventStore,
    EventStore,
    InvalidEvent,
    NewEvent,
    Personal,
)
from eventcraft.eventstore.retention import RetentionPolicy
from eventcraft.projections import ProjectionRunner, TypedEvent
from eventcraft.sagas import (
    AsyncOrchestrator,
    Failure,
    Orchestrator,
    ProcessManager,
    RetryPolicy,
    Route,
    Saga,
    SagaDefinitionError,
    Step,
    StepContext,
    wait_for,
)
from pydantic import BaseModel

from eventcraft.app import App
from eventcraft.operations import retention
from eventcraft.operations import sagas as saga_operations

from ..plaintext import archive_text, database_text

SUBJECT = "customer-s7"
NAME = "Ada Saga-Lovelace"
EMAIL = "ada.saga@analytical.example"
IBAN = "DE89 3704 0044 0532 0130 00"
OTHER_NAME = "Charles Saga-Babbage"
PLAIN = (NAME, EMAIL, IBAN)


class Opened(BaseModel):
    """A step's result: the account is plain, its IBAN the saga subject's."""

    account_id: str
    iban: Annotated[str, Personal()]


class Onboarding(BaseModel):
    """Start data as a model: each personal field names whose it is."""

    customer_id: str
    referrer_id: str
    name: Annotated[str, Personal(subject="customer_id")]
    referrer_name: Annotated[str, Personal(subject="referrer_id")]


def _open_account(data: dict[str, Any], context: StepContext) -> Opened:
    return Opened(account_id=f"account-{data['order_id']}", iban=IBAN)


def _welcome(data: dict[str, Any], context: StepContext) -> dict[str, Any]:
    # What the step saw, kept plain in its result, so a test can tell.
    seen = data["name"] == NAME and context.results["open"]["iban"] == IBAN
    return {"saw_the_fields": seen, "saw_them_forgotten": data["name"] == FORGOTTEN}


ONBOARDING = Saga("onboarding", [Step("open", _open_account), Step("welcome", _welcome)])


def _start(orchestrator: Orchestrator, saga: Saga = ONBOARDING) -> None:
    orchestrator.start(
        saga,
        {"order_id": "o-visible-1"},
        saga_id="o-1",
        subject=SUBJECT,
        personal={"name": NAME, "email": EMAIL},
    )


@pytest.mark.slow
def test_a_forgotten_subjects_saga_data_and_results_are_neither_in_the_database_nor_the_archive(
    shared_store_url: str, tmp_path: Path
) -> None:
    archive = tmp_path / "archive"
    with EventStore.open(shared_store_url) as store:
        orchestrator = Orchestrator(store, [ONBOARDING])
        _start(orchestrator)
        assert orchestrator.run_pending() == 0
        done = orchestrator.state("onboarding", "o-1")
        assert done.status == "completed"
        assert done.data == {"order_id": "o-visible-1", "name": NAME, "email": EMAIL}
        assert done.results["open"] == {"account_id": "account-o-visible-1", "iban": IBAN}
        assert done.results["welcome"]["saw_the_fields"] is True
        everything = [RetentionPolicy("audit", max_age=timedelta(days=3650))]
        assert retention.apply(store, everything, [], str(archive)).archived == 6

        assert store.forget(SUBJECT) == 1
        forgotten = orchestrator.state("onboarding", "o-1")
        assert forgotten.data == {"order_id": "o-visible-1", "name": FORGOTTEN, "email": FORGOTTEN}
        assert forgotten.results["open"] == {
            "account_id": "account-o-visible-1",
            "iban": FORGOTTEN,
        }

    after = database_text(shared_store_url, tmp_path)
    archived = archive_text(archive)
    assert b"o-visible-1" in after and b"o-visible-1" in archived  # the scans see the saga
    for text in PLAIN:
        assert text.encode() not in after, f"{text!r} is in the database"
        assert text.encode() not in archived, f"{text!r} is in the archive"


@pytest.mark.slow
def test_a_saga_whose_subject_is_forgotten_while_it_runs_carries_on_with_the_fields_forgotten(
    store: EventStore,
) -> None:
    saga = Saga(
        "onboarding",
        [
            Step("open", _open_account),
            wait_for("confirmed", "Confirmed"),
            Step("welcome", _welcome),
        ],
    )
    orchestrator = Orchestrator(store, [saga])
    _start(orchestrator, saga)
    assert orchestrator.run_pending() == 1  # waiting for the confirmation
    store.forget(SUBJECT)
    store.append("confirmations-o-1", [NewEvent("Confirmed", {"ok": True})])
    (event,) = store.read_stream("confirmations-o-1")
    orchestrator.signal("onboarding", "o-1", event)
    assert orchestrator.run_pending() == 0
    done = orchestrator.state("onboarding", "o-1")
    assert done.status == "completed"
    assert done.results["welcome"] == {"saw_the_fields": False, "saw_them_forgotten": True}
    assert done.results["open"]["iban"] == FORGOTTEN


def test_a_start_models_fields_are_sealed_each_under_its_own_subject(store: EventStore) -> None:
    orchestrator = Orchestrator(store, [ONBOARDING])
    data = Onboarding(
        customer_id=SUBJECT, referrer_id="customer-r2", name=NAME, referrer_name=OTHER_NAME
    )
    orchestrator.start(ONBOARDING, data, saga_id="o-2")
    store.forget("customer-r2")
    state = orchestrator.state("onboarding", "o-2")
    assert state.data == {
        "customer_id": SUBJECT,
        "referrer_id": "customer-r2",
        "name": NAME,
        "referrer_name": FORGOTTEN,
    }


def test_a_signalled_events_personal_fields_stay_sealed_in_the_sagas_copy(
    store: EventStore,
) -> None:
    class Confirmed(BaseModel):
        customer_id: str
        email: Annotated[str, Personal(subject="customer_id")]

    saga = Saga("confirming", [wait_for("confirmed", "Confirmed")])
    orchestrator = Orchestrator(store, [saga])
    orchestrator.start(saga, {"order_id": "o-3"}, saga_id="o-3")
    typed = Confirmed(customer_id=SUBJECT, email=EMAIL)
    store.append("confirmations-o-3", [NewEvent("Confirmed", typed)])
    (event,) = store.read_stream("confirmations-o-3")
    orchestrator.signal("confirming", "o-3", event, data=typed)
    assert orchestrator.run_pending() == 0
    assert orchestrator.state("confirming", "o-3").results["confirmed"]["email"] == EMAIL
    store.forget(SUBJECT)
    state = orchestrator.state("confirming", "o-3")
    assert state.signals["Confirmed"] == {"customer_id": SUBJECT, "email": FORGOTTEN}
    assert state.results["confirmed"] == {"customer_id": SUBJECT, "email": FORGOTTEN}


def test_personal_data_without_a_subject_is_refused_and_nothing_is_started(
    store: EventStore,
) -> None:
    orchestrator = Orchestrator(store, [ONBOARDING])
    with pytest.raises(SagaDefinitionError, match="subject="):
        orchestrator.start(ONBOARDING, {"order_id": "o-4"}, saga_id="o-4", personal={"n": "x"})
    with pytest.raises(SagaDefinitionError, match="'order_id' is in both"):
        orchestrator.start(
            ONBOARDING,
            {"order_id": "o-4"},
            saga_id="o-4",
            subject=SUBJECT,
            personal={"order_id": "x"},
        )
    with pytest.raises(SagaDefinitionError, match="subject= must not be empty"):
        orchestrator.start(ONBOARDING, {"order_id": "o-4"}, saga_id="o-4", subject="")
    assert list(store.read_stream("saga-onboarding:o-4")) == []


def test_a_result_whose_personal_field_has_no_subject_fails_its_step_saying_so(
    store: EventStore,
) -> None:
    orchestrator = Orchestrator(store, [ONBOARDING])
    orchestrator.start(ONBOARDING, {"order_id": "o-5"}, saga_id="o-5")
    orchestrator.run_pending()
    state = orchestrator.state("onboarding", "o-5")
    assert state.status == "compensated"
    assert "unstorable result" in (state.failure or "")
    assert "iban" in (state.failure or "") and "subject=" in (state.failure or "")
    assert IBAN.encode() not in repr([e.data for e in store.read_all()]).encode()


def test_a_plain_saga_is_stored_as_before(store: EventStore) -> None:
    orchestrator = Orchestrator(store, [ONBOARDING])
    orchestrator.start(ONBOARDING, {"order_id": "o-6"}, saga_id="o-6")
    (started,) = store.read_stream("saga-onboarding:o-6")
    assert started.data == {
        "saga": "onboarding",
        "data": {"order_id": "o-6"},
        "deadline": None,
        "correlation_id": "o-6",
    }


def test_the_async_orchestrator_seals_a_sagas_start_data_and_signals_too(
    shared_store_url: str,
) -> None:
    class Confirmed(BaseModel):
        email: Annotated[str, Personal()]  # the event's stream's

    saga = Saga("confirming", [wait_for("confirmed", "Confirmed")])

    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        async with await AsyncEventStore.open(shared_store_url) as store:
            orchestrator = await AsyncOrchestrator.open(store, [saga])
            await orchestrator.start(
                saga, {"order_id": "o-7"}, saga_id="o-7", subject=SUBJECT, personal={"name": NAME}
            )
            typed = Confirmed(email=EMAIL)
            await store.append(SUBJECT, [NewEvent("Confirmed", typed)])
            (event,) = [e async for e in store.read_stream(SUBJECT)]
            assert await orchestrator.signal("confirming", "o-7", event, data=typed)
            assert await orchestrator.run_pending() == 0
            assert await store.forget(SUBJECT) == 1
            state = await orchestrator.state("confirming", "o-7")
            return state.data, state.results["confirmed"]

    data, result = asyncio.run(scenario())
    assert data == {"order_id": "o-7", "name": FORGOTTEN}
    assert result == {"email": FORGOTTEN}


def test_an_unencodable_personal_value_is_refused_at_the_start(store: EventStore) -> None:
    orchestrator = Orchestrator(store, [ONBOARDING])
    with pytest.raises(InvalidEvent, match="start data of saga 'onboarding'"):
        orchestrator.start(
            ONBOARDING,
            {"order_id": "o-8"},
            saga_id="o-8",
            subject=SUBJECT,
            personal={"name": object()},
        )
    assert list(store.read_stream("saga-onboarding:o-8")) == []


people = EventRegistry()


@people.event("CustomerRegistered")
class CustomerRegistered(DomainEvent):
    name: Annotated[str, Personal()]  # the customer's: the event's stream
    email: Annotated[str, Personal()]


@people.event("EmailConfirmed")
class EmailConfirmed(DomainEvent):
    customer_id: str
    email: Annotated[str, Personal(subject="customer_id")]


def _mail_account(data: dict[str, Any], context: StepContext) -> Opened:
    assert data["email"] == EMAIL
    return Opened(account_id="account-1", iban=IBAN)


def test_a_process_manager_given_the_registry_keeps_the_events_personal_fields_sealed(
    shared_store_url: str, tmp_path: Path
) -> None:
    saga = Saga(
        "welcoming",
        [Step("open", _mail_account), wait_for("confirmed", "EmailConfirmed")],
    )

    def customer(event: TypedEvent[Any]) -> str:
        return event.stream_id

    def confirming(event: TypedEvent[EmailConfirmed]) -> str:
        return str(event.data.customer_id)

    with EventStore.open(shared_store_url) as store:
        orchestrator = Orchestrator(store, [saga])
        manager = ProcessManager(
            "welcomes",
            orchestrator,
            [
                Route("CustomerRegistered", saga, "start", customer),
                Route("EmailConfirmed", saga, "signal", confirming),
            ],
            registry=people,
        )
        registered = CustomerRegistered(name=NAME, email=EMAIL)
        store.append(SUBJECT, [NewEvent("CustomerRegistered", registered)])
        confirmed = EmailConfirmed(customer_id=SUBJECT, email=EMAIL)
        store.append("confirmations-s7", [NewEvent("EmailConfirmed", confirmed)])
        with ProjectionRunner(store, [manager.subscription()]) as runner:
            runner.catch_up()
        assert orchestrator.run_pending() == 0
        done = orchestrator.state("welcoming", SUBJECT)
        assert done.data == {"name": NAME, "email": EMAIL}
        assert done.results["open"]["iban"] == IBAN  # Personal(): the saga's, the stream's
        assert done.results["confirmed"] == {"customer_id": SUBJECT, "email": EMAIL}

        assert store.forget(SUBJECT) == 1
        forgotten = orchestrator.state("welcoming", SUBJECT)
        assert forgotten.data == {"name": FORGOTTEN, "email": FORGOTTEN}
        assert forgotten.results["confirmed"]["email"] == FORGOTTEN
    after = database_text(shared_store_url, tmp_path)
    assert b"welcoming" in after
    for text in PLAIN:
        assert text.encode() not in after, f"{text!r} is in the database"


class Refund(BaseModel):
    customer_id: Any
    iban: Annotated[str, Personal(subject="customer_id")]


def _refund_to(customer: Any) -> Saga:
    def refund(data: dict[str, Any], context: StepContext) -> Refund:
        return Refund(customer_id=customer, iban=IBAN)

    return Saga("refunding", [Step("refund", refund), Step("after", _welcome)])


@pytest.mark.parametrize("customer", ["", True, "x" * 10_000])
def test_a_result_whose_subject_the_store_cannot_hold_fails_its_step_at_once(
    store: EventStore, customer: Any
) -> None:
    saga = _refund_to(customer)
    orchestrator = Orchestrator(store, [saga])
    orchestrator.start(saga, {"order_id": "o-9"}, saga_id="o-9")
    assert orchestrator.run_pending() == 0
    state = orchestrator.state("refunding", "o-9")
    assert state.status == "compensated"
    assert "unstorable result" in (state.failure or "")
    assert "the subject of personal field 'iban'" in (state.failure or "")


class CardDeclined(Exception):
    """A business failure whose message quotes the customer."""


class RefundRefused(Exception):
    """A compensation's failure whose message quotes the customer."""


def _declined(data: dict[str, Any], context: StepContext) -> None:
    raise CardDeclined(f"the card of {NAME} was declined")


def _refund_refused(data: dict[str, Any], context: StepContext) -> None:
    raise RefundRefused(f"no refund for {NAME}")


def _done(data: dict[str, Any], context: StepContext) -> dict[str, Any]:
    return {}


def _owes(data: dict[str, Any], context: StepContext) -> Failure:
    return Failure(f"{NAME} owes too much")


SHIPPING = Saga(
    "shipping",
    [
        Step("pay", _done, _refund_refused, compensation_retry=RetryPolicy(1)),
        Step("ship", _declined, fails_on=(CardDeclined,)),
    ],
)
BILLING = Saga("billing", [Step("hold", _done, _done), Step("bill", _owes)])


@pytest.mark.slow
def test_a_forgotten_subjects_name_quoted_by_a_failure_is_neither_in_the_database_nor_the_archive(
    shared_store_url: str, tmp_path: Path
) -> None:
    archive = tmp_path / "archive"
    app = App(sagas=[SHIPPING, BILLING])
    with EventStore.open(shared_store_url) as store:
        orchestrator = Orchestrator(store, app.sagas)
        for saga in app.sagas:
            orchestrator.start(saga, {"order_id": "o-visible-2"}, saga_id="o-2", subject=SUBJECT)
        orchestrator.run_pending()
        shipping = orchestrator.state("shipping", "o-2")
        billing = orchestrator.state("billing", "o-2")
        assert (shipping.status, billing.status) == ("parked", "compensated")
        # Known while the subject is: the failures read whole.
        assert NAME in (shipping.failure or "") and NAME in (shipping.parked_because or "")
        assert NAME in (billing.failure or "")
        everything = [RetentionPolicy("audit", max_age=timedelta(days=3650))]
        retention.apply(store, everything, [], str(archive))

        store.forget(SUBJECT)
        shipping = orchestrator.state("shipping", "o-2")
        billing = orchestrator.state("billing", "o-2")
        assert shipping.failure == f"step ship failed: CardDeclined: {FORGOTTEN}"
        assert shipping.parked_because == f"RefundRefused: {FORGOTTEN}"
        assert billing.failure == f"step bill failed: Failure: {FORGOTTEN}"
        shown = saga_operations.saga(store, app, "shipping", "o-2")
        errors = [t.error for t in shown.transitions if t.error is not None]
        assert errors == [
            f"CardDeclined: {FORGOTTEN}",
            f"RefundRefused: {FORGOTTEN}",
            f"RefundRefused: {FORGOTTEN}",  # and parked on it
        ]
        notes = [t.note for t in saga_operations.saga(store, app, "billing", "o-2").transitions]
        assert f"step bill failed: Failure: {FORGOTTEN}" in notes  # failed, and compensated
        assert NAME not in repr(shown) and NAME not in repr(notes)

    after = database_text(shared_store_url, tmp_path)
    archived = archive_text(archive)
    assert b"o-visible-2" in after and b"o-visible-2" in archived  # the scans see the sagas
    assert b"CardDeclined" in after and b"RefundRefused" in after  # the types, in the clear
    assert NAME.encode() not in after, "the name is in the database"
    assert NAME.encode() not in archived, "the name is in the archive"


def test_a_failure_quoting_the_subjects_name_is_logged_by_its_type_alone(
    store: EventStore, caplog: pytest.LogCaptureFixture
) -> None:
    orchestrator = Orchestrator(store, [SHIPPING])
    orchestrator.start(SHIPPING, {}, saga_id="o-3", subject=SUBJECT)
    with caplog.at_level("INFO", logger="eventcraft.sagas"):
        orchestrator.run_pending()
    logged = caplog.text
    assert "step ship failed: CardDeclined" in logged
    assert NAME not in logged
