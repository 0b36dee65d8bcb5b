"""What a forget erases beside the key, and what it leaves: the error messages of the
subject's parked events and the failed messages naming it, each place reported, on SQLite
and PostgreSQL."""

from __future__ import annotations

import logging
from pathlib import Path

import orjson
import pytest
from eventcraft.eventstore import FORGOTTEN, EventStore
from eventcraft.messaging import DATA_SUBJECTS_HEADER, Inbox, IncomingMessage
from eventcraft.messaging import failed as error_store
from eventcraft.projections import Database, ProjectionRunner

from eventcraft.operations import messaging as messaging_operations
from eventcraft.operations import personal as operations

from . import forget_app
from .conftest import Run
from .forget_app import EMAIL, NAME, OTHER, SUBJECT, registered

OTHER_SUBJECT = "customer-k4"


def _message(message_id: str, name: str, header: str | None) -> IncomingMessage:
    headers = {} if header is None else {DATA_SUBJECTS_HEADER: header}
    return IncomingMessage(message_id, orjson.dumps({"customer": name}), headers)


def _failures(store: EventStore, *messages: IncomingMessage) -> None:
    with Inbox("orders-in", store, forget_app.refusing) as inbox:
        for message in messages:
            assert inbox.take(message) is None


@pytest.fixture
def seeded(shared_store_url: str) -> str:
    """Both customers registered, each event parked by the projection that fails on it."""
    with EventStore.open(shared_store_url) as store:
        store.append(SUBJECT, [registered(SUBJECT, NAME, EMAIL)])
        store.append(OTHER_SUBJECT, [registered(OTHER_SUBJECT, OTHER, "k4@example.test")])
        with ProjectionRunner(store, forget_app.app.projections) as runner:
            runner.catch_up()
    return shared_store_url


def _parked_errors(store: EventStore) -> dict[int, tuple[str, str]]:
    with ProjectionRunner(store, forget_app.app.projections) as runner:
        return {p.position: (p.error, p.traceback) for p in runner.parked("customer-greetings")}


def test_a_parked_events_traceback_says_where_it_failed_and_never_what_it_said(
    seeded: str,
) -> None:
    with EventStore.open(seeded) as store:
        error, trace = _parked_errors(store)[1]
    assert error == f"ValueError: cannot greet {NAME} <{EMAIL}>"
    assert "in _greeted" in trace and trace.rstrip().endswith("ValueError")
    assert NAME not in trace and EMAIL not in trace


def test_a_forget_erases_the_error_messages_of_the_subjects_parked_events_only(
    seeded: str,
) -> None:
    with EventStore.open(seeded) as store:
        done = operations.forget(store.keys, SUBJECT, store)
        parked = _parked_errors(store)
        assert parked[1][0] == f"ValueError: {FORGOTTEN}"
        assert "in _greeted" in parked[1][1]  # where it failed is still there
        assert parked[2][0] == f"ValueError: cannot greet {OTHER} <k4@example.test>"
        places = {place.place: place.erased for place in done.places}
        assert places == {operations.KEYS: 1, operations.PARKED: 1}  # no inbox ever ran
        again = operations.forget(store.keys, SUBJECT, store)
        assert [place.erased for place in again.places] == [0, 0]


def test_a_forget_erases_and_discards_the_failed_messages_naming_the_subject(
    seeded: str,
) -> None:
    with EventStore.open(seeded) as store:
        _failures(
            store,
            _message("m-named", NAME, orjson.dumps([OTHER_SUBJECT, SUBJECT]).decode()),
            _message("m-other", OTHER, orjson.dumps([OTHER_SUBJECT]).decode()),
            _message("m-unnamed", NAME, None),
        )
        messaging_operations.discard(store, "orders-in", "m-other", "a test")
        done = operations.forget(store.keys, SUBJECT, store)
        assert {p.place: p.erased for p in done.places}[operations.FAILED] == 1
        [waiting] = messaging_operations.failed(store, "orders-in")
        assert waiting.message_id == "m-unnamed" and NAME in waiting.body  # names nobody
        named, other = messaging_operations.failed(store, "orders-in", discarded=True)
        assert (named.message_id, named.body, named.headers) == ("m-named", "", {})
        assert named.error == f"InvalidMessage: {FORGOTTEN}" and NAME not in named.traceback
        assert named.discard_reason == "a data subject it names was forgotten"
        # Discarded before, by an operator: its record keeps the operator's reason.
        assert (other.message_id, other.discard_reason) == ("m-other", "a test")
        again = operations.forget(store.keys, SUBJECT, store)
        assert {p.place: p.erased for p in again.places}[operations.FAILED] == 0


def test_a_message_whose_subjects_header_is_malformed_names_none_and_is_kept(
    seeded: str, caplog: pytest.LogCaptureFixture
) -> None:
    with EventStore.open(seeded) as store:
        with caplog.at_level(logging.WARNING, "eventcraft.messaging"):
            _failures(store, _message("m-odd", NAME, SUBJECT))  # not a JSON array
        assert f"the {DATA_SUBJECTS_HEADER} header is not a JSON array" in caplog.text
        database = Database.of(None, store)
        try:
            with database.reading() as connection:
                found = error_store.find(connection, "orders-in", "m-odd")
        finally:
            database.close()
        assert found is not None and found.data_subjects == () and NAME in found.body.decode()


def test_forget_reports_what_it_erased_in_each_place(seeded: str, run: Run) -> None:
    with EventStore.open(seeded) as store:
        _failures(store, _message("m-named", NAME, orjson.dumps([SUBJECT]).decode()))
    done = run("--store", seeded, "forget", SUBJECT, "--yes")
    assert done.code == 0, done.err
    out = done.out.replace("\n", " ")
    assert "parked projection events erased: 1 (eventcraft_parked in" in out
    assert "failed inbox messages erased: 1 (eventcraft_inbox_failed in" in out
    as_json = run("--store", seeded, "forget", SUBJECT, "--yes", "--json")
    places = orjson.loads(as_json.out)["places"]
    assert [(p["place"], p["erased"]) for p in places] == [
        ("keys", 0),
        ("parked projection events", 0),
        ("failed inbox messages", 0),
    ]


def test_forget_with_a_key_store_and_no_store_named_erases_the_key_alone(
    tmp_path: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EVENTCRAFT_STORE", raising=False)
    store_url, keys_url = f"sqlite:///{tmp_path / 'events.db'}", f"sqlite:///{tmp_path / 'k.db'}"
    with EventStore.open(store_url, keys=keys_url) as store:
        store.append(SUBJECT, [registered(SUBJECT, NAME, EMAIL)])
    done = run("forget", SUBJECT, "--keys", keys_url, "--yes", "--json")
    assert done.code == 0, done.err
    assert [p["place"] for p in orjson.loads(done.out)["places"]] == ["keys"]
