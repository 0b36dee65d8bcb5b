"""An exception's message that quotes a personal field reaches no log record and no span.

Each handler here (a projection's, a subscriber's, a process manager's route, a saga
step, an inbox mapping, a relay's publisher) raises an error whose message quotes a
customer's name, a `Personal` field opened by the read that handed it over. Logs and
traces are copied where no forget reaches, so they say what failed (type, where, ids)
and point to where the message is kept; that place keeps it until the customer is
forgotten.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Annotated, Any

import orjson
import pytest
from eventcraft.eventstore import FORGOTTEN, EventStore, NewEvent, Personal, RecordedEvent
from eventcraft.messaging import (
    DATA_SUBJECTS_HEADER,
    Inbox,
    InboxErrorStore,
    IncomingMessage,
    Mapped,
    MessageRefused,
    OutgoingMessage,
    Publisher,
    Relay,
)
from eventcraft.projections import (
    CheckpointTable,
    Database,
    ErrorPolicy,
    ParkedEvent,
    Projection,
    ProjectionRunner,
    ProjectionStopped,
    ReadModel,
    Subscription,
)
from eventcraft.sagas import Orchestrator, ProcessManager, Route, Saga, Step, StepContext
from pydantic import BaseModel

from eventcraft.operations import personal as operations
from tests.waiting import until

from .conftest import Telemetry

SUBJECT = "customer-w3"
"""An opaque id: stream ids and subjects are not personal data."""
NAME = "Wilhelmina Quarrystone-Kq8"
"""The plaintext of a personal field: in no log record, no span."""


class Registered(BaseModel):
    customer_id: str
    name: Annotated[str, Personal(subject="customer_id")]


def _registered(store: EventStore) -> int:
    event = NewEvent("Registered", Registered(customer_id=SUBJECT, name=NAME))
    return store.append(SUBJECT, [event]).positions[0]


class CardDeclined(Exception):
    pass


@pytest.fixture
def logged(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    with caplog.at_level(logging.DEBUG):
        yield caplog


def _log_text(caplog: pytest.LogCaptureFixture) -> str:
    """Every record as a handler would format it (tracebacks included), and its fields."""
    return caplog.text + "\n".join(repr(record.__dict__) for record in caplog.records)


def _trace_text(telemetry: Telemetry) -> str:
    """Every finished span's name, attributes, status, events and links, as text."""
    parts: list[str] = []
    for span in telemetry.finished():
        parts += [span.name, repr(dict(span.attributes or {})), span.status.description or ""]
        parts += [f"{e.name} {dict(e.attributes or {})!r}" for e in span.events]
        parts += [repr(dict(link.attributes or {})) for link in span.links]
    return "\n".join(parts)


def _nowhere_said(telemetry: Telemetry, caplog: pytest.LogCaptureFixture) -> None:
    assert NAME not in _log_text(caplog), "the name is in a log record"
    assert NAME not in _trace_text(telemetry), "the name is in a span"


def _exceptions(telemetry: Telemetry, span_name: str) -> list[dict[str, Any]]:
    return [
        dict(event.attributes or {})
        for span in telemetry.finished(span_name)
        for event in span.events
        if event.name == "exception"
    ]


def _parked(store: EventStore, name: str) -> list[ParkedEvent]:
    database = Database.of(None, store)
    try:
        with database.reading() as connection:
            return CheckpointTable(connection).parked(name)
    finally:
        database.close()


# --- projections ---------------------------------------------------------------------

greetings = Projection(
    "greetings", tables=[], on_error=ErrorPolicy(attempts=2, backoff=0, then="skip")
)


@greetings.on("Registered")
def _greet(read_model: ReadModel, event: RecordedEvent) -> None:
    raise ValueError(f"cannot greet {event.data['name']}")


def test_a_parked_events_message_is_kept_in_the_error_store_until_a_forget_and_never_logged(
    telemetry: Telemetry, logged: pytest.LogCaptureFixture, sqlite_url: str
) -> None:
    with EventStore.open(sqlite_url) as store:
        position = _registered(store)
        with ProjectionRunner(store, [greetings], lease_ttl=None) as runner:
            runner.catch_up()
            (parked,) = runner.parked("greetings")
            assert parked.error == f"ValueError: cannot greet {NAME}"
            operations.forget(store.keys, SUBJECT, store)
            (forgotten,) = runner.parked("greetings")
    assert forgotten.error == f"ValueError: {FORGOTTEN}"
    _nowhere_said(telemetry, logged)
    (batch,) = telemetry.finished("process greetings")
    said = {event.name: dict(event.attributes or {}) for event in batch.events}
    assert said["parked"]["exception.type"] == "ValueError"
    assert "error store" in str(said["parked"]["exception.message"])
    assert said["parked"]["eventcraft.position"] == position
    (record,) = [r for r in logged.records if "parked the event" in r.getMessage()]
    assert f"at {position} ({SUBJECT} v1, Registered)" in record.getMessage()
    assert "ValueError raised in _greet" in record.getMessage()


def test_a_projection_stopped_on_a_message_quoting_personal_data_logs_and_traces_its_type(
    telemetry: Telemetry, logged: pytest.LogCaptureFixture, sqlite_url: str
) -> None:
    def welcome(event: RecordedEvent) -> None:
        raise ValueError(f"cannot welcome {event.data['name']}")

    welcomes = Subscription("welcomes", welcome, on_error=ErrorPolicy(attempts=1, then="stop"))
    with EventStore.open(sqlite_url) as store:
        position = _registered(store)
        with ProjectionRunner(store, [welcomes], lease_ttl=None) as runner:
            runner.start()  # its thread logs the stop
            with pytest.raises(ProjectionStopped):
                runner.wait_until(position, timeout=30)
            (parked,) = runner.parked("welcomes")
    assert NAME in parked.error
    _nowhere_said(telemetry, logged)
    (stopped,) = [r for r in logged.records if "stopped at position" in r.getMessage()]
    assert "ValueError raised in welcome" in stopped.getMessage()
    (batch,) = telemetry.finished("process welcomes")
    assert "ProjectionStopped raised in" in (batch.status.description or "")
    (exception,) = _exceptions(telemetry, "process welcomes")
    assert exception["exception.type"] == "eventcraft.projections.errors.ProjectionStopped"


# --- sagas ----------------------------------------------------------------------------


def _charge(data: dict[str, Any], context: StepContext) -> None:
    raise CardDeclined(f"the card of {data['name']} was declined")


def _ship(data: dict[str, Any], context: StepContext) -> None:
    raise KeyError(data["name"])  # a bug: undeclared


def _release(data: dict[str, Any], context: StepContext) -> None:
    return None


paying = Saga(
    "paying",
    [
        Step("reserve", lambda data, context: None, _release),
        Step("charge", _charge, fails_on=(CardDeclined,)),
    ],
)
shipping = Saga("shipping", [Step("ship", _ship)])


@pytest.mark.parametrize("subject", [SUBJECT, None], ids=["sealed", "no one's"])
def test_a_saga_steps_message_quoting_personal_data_is_logged_and_traced_by_its_type(
    telemetry: Telemetry,
    logged: pytest.LogCaptureFixture,
    sqlite_url: str,
    subject: str | None,
) -> None:
    with EventStore.open(sqlite_url) as store:
        orchestrator = Orchestrator(store, [paying, shipping])
        personal = None if subject is None else {"name": NAME}
        data = {"name": NAME} if subject is None else {}
        orchestrator.start(paying, data, saga_id="1", subject=subject, personal=personal)
        orchestrator.start(shipping, data, saga_id="1", subject=subject, personal=personal)
        orchestrator.run_pending()
        paid, shipped = orchestrator.state("paying", "1"), orchestrator.state("shipping", "1")
        assert (paid.status, shipped.status) == ("compensated", "parked")
        assert NAME in (paid.failure or "")  # the saga's stream keeps the message
        if subject is not None:
            store.forget(subject)
            paid = orchestrator.state("paying", "1")
            assert paid.failure == f"step charge failed: CardDeclined: {FORGOTTEN}"
    _nowhere_said(telemetry, logged)
    charged = _exceptions(telemetry, "saga paying step charge")
    assert [e["exception.type"] for e in charged] == [f"{__name__}.CardDeclined"]
    assert "the saga's stream" in charged[0]["exception.message"]
    (ship,) = telemetry.finished("saga shipping step ship")
    assert "KeyError raised in _ship" in (ship.status.description or "")
    said = [r.getMessage() for r in logged.records if r.name == "eventcraft.sagas"]
    assert "saga saga-paying:1 failed: step charge failed: CardDeclined" in said


def test_a_process_managers_route_failing_on_personal_data_is_traced_by_its_type(
    telemetry: Telemetry, logged: pytest.LogCaptureFixture, sqlite_url: str
) -> None:
    def saga_id(event: RecordedEvent) -> str:
        raise LookupError(f"no order of {event.data['name']}")

    with EventStore.open(sqlite_url) as store:
        _registered(store)
        orchestrator = Orchestrator(store, [shipping])
        manager = ProcessManager(
            "shipments", orchestrator, [Route("Registered", shipping, "start", saga_id)]
        )
        with ProjectionRunner(store, [manager.subscription()], lease_ttl=None) as runner:
            with pytest.raises(ProjectionStopped):  # a process manager stops on a failure
                runner.catch_up()
            (parked,) = runner.parked("shipments")
    assert NAME in parked.error
    _nowhere_said(telemetry, logged)
    tries = telemetry.finished("handle shipments")
    assert tries, "no span of the process manager's handling"
    assert all("LookupError raised in saga_id" in (s.status.description or "") for s in tries)


# --- messaging ------------------------------------------------------------------------


def _unreadable(message: IncomingMessage) -> Mapped:
    raise ValueError(f"no plan for {message.json()['name']}")


def test_an_inbox_keeps_the_message_of_a_failure_in_its_error_store_and_logs_its_type(
    telemetry: Telemetry, logged: pytest.LogCaptureFixture, sqlite_url: str
) -> None:
    body = orjson.dumps({"name": NAME})
    message = IncomingMessage("m-1", body, {DATA_SUBJECTS_HEADER: orjson.dumps([SUBJECT]).decode()})
    with EventStore.open(sqlite_url) as store, Inbox("customers-in", store, _unreadable) as inbox:
        assert inbox.take(message) is None
        (failed,) = inbox.failures()
        assert failed.error == f"ValueError: no plan for {NAME}"
        operations.forget(store.keys, SUBJECT, store)
        database = Database.of(None, store)
        erased = InboxErrorStore(database).listed(discarded=True)
        database.close()
    assert [m.error for m in erased] == [f"ValueError: {FORGOTTEN}"]
    _nowhere_said(telemetry, logged)
    (record,) = [r for r in logged.records if "failed:" in r.getMessage()]
    assert "message 'm-1' failed: ValueError raised in _unreadable" in record.getMessage()
    assert "the inbox's error store" in record.getMessage()


class _Quoting(Publisher):
    """A broker client whose refusals quote the message they refused."""

    broker = "quoting broker"

    def __init__(self, refuse: type[Exception]) -> None:
        self.refuse = refuse

    def publish(self, messages: Sequence[OutgoingMessage]) -> None:
        for message in messages:
            said = f"cannot take {orjson.loads(message.body)['name']}"
            if self.refuse is MessageRefused:
                raise MessageRefused(self.broker, message.message_id, said)
            raise self.refuse(said)

    def close(self) -> None:
        return None


def test_a_relays_refused_event_is_parked_with_the_refusal_and_logged_by_its_type(
    telemetry: Telemetry, logged: pytest.LogCaptureFixture, sqlite_url: str
) -> None:
    with EventStore.open(sqlite_url) as store:
        position = _registered(store)
        with Relay("customers-out", store, _Quoting(MessageRefused)) as relay:
            relay.catch_up()
            assert relay.status().parked == 1
        (parked,) = _parked(store, "customers-out")
        assert NAME in parked.error
        operations.forget(store.keys, SUBJECT, store)
        (forgotten,) = _parked(store, "customers-out")
    assert forgotten.error == f"MessageRefused: {FORGOTTEN}"
    _nowhere_said(telemetry, logged)
    (record,) = [r for r in logged.records if "parked, going on" in r.getMessage()]
    assert f"refused the event at {position} ({SUBJECT} v1, Registered)" in record.getMessage()


def test_a_relay_failing_on_personal_data_logs_and_records_its_type_and_tries_again(
    telemetry: Telemetry, logged: pytest.LogCaptureFixture, sqlite_url: str
) -> None:
    with EventStore.open(sqlite_url) as store:
        _registered(store)
        with Relay("customers-out", store, _Quoting(RuntimeError)) as relay:
            relay.start()
            until(lambda: relay.status().last_error is not None, "the relay to fail")
            relay.stop()
            recorded = relay.status().last_error or ""
    assert recorded.startswith("RuntimeError raised in publish")
    _nowhere_said(telemetry, logged)
    (record,) = [r for r in logged.records if "failed; trying again" in r.getMessage()]
    assert "in publish" in record.getMessage()  # the bare traceback: frames, no message
