"""A forget, then the rebuild the README gives, leave none of the subject's plaintext
anywhere the store or its parts keep data: the whole database (SQLite's files, PostgreSQL's
dump) and the Parquet archive, on SQLite and PostgreSQL.

The subject's data is put in every place first: its events and snapshot, a read model,
a parked projection event (whose exception quotes the data), failed inbox messages (one
naming its subject, one an operator discards with `--reason gdpr`), sagas' start data and
step results (one started with `personal=`, one by a process manager from the customer's
event), and the archive.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import orjson
import pytest
from eventcraft.eventstore import FORGOTTEN, EventStore
from eventcraft.eventstore.retention import RetentionPolicy
from eventcraft.messaging import DATA_SUBJECTS_HEADER, Inbox, IncomingMessage
from eventcraft.projections import ProjectionRunner
from eventcraft.sagas import Orchestrator

from eventcraft.operations import retention

from ..plaintext import archive_text, database_text
from . import forget_app
from .conftest import Run
from .forget_app import EMAIL, NAME, OTHER, PLAIN, SUBJECT, Profile, registered

APP = ("--app", "tests.cli.forget_app:app")


def _message(message_id: str, name: str, email: str, subject: str | None) -> IncomingMessage:
    body = orjson.dumps({"customer": name, "email": email})
    headers = {} if subject is None else {DATA_SUBJECTS_HEADER: orjson.dumps([subject]).decode()}
    return IncomingMessage(message_id, body, headers, "orders.placed")


def _seed(url: str, archive: Path) -> None:
    """The subject's data, and another customer's, in every place."""
    with EventStore.open(url) as store:
        store.append(SUBJECT, [registered(SUBJECT, NAME, EMAIL)])
        store.append("customer-k4", [registered("customer-k4", OTHER, "bob.k4@example.test")])
        store.save_snapshot(
            SUBJECT, version=1, type="Profile", data=Profile(name=NAME, plan="gold")
        )
        with ProjectionRunner(store, forget_app.app.projections) as runner:
            runner.catch_up()
            assert [p.position for p in runner.parked("customer-greetings")] == [1, 2]
        with Inbox("orders-in", store, forget_app.refusing) as inbox:
            assert inbox.take(_message("m-named", NAME, EMAIL, SUBJECT)) is None
            assert inbox.take(_message("m-unnamed", NAME, EMAIL, None)) is None
            assert (
                inbox.take(_message("m-other", OTHER, "bob.k4@example.test", "customer-k4")) is None
            )
        orchestrator = Orchestrator(store, forget_app.app.sagas)
        orchestrator.start(
            forget_app.onboarding,
            {"order_id": "o-q7"},
            saga_id="o-q7",
            subject=SUBJECT,
            personal={"name": NAME, "email": EMAIL},
        )
        with ProjectionRunner(store, [forget_app.welcomes(orchestrator).subscription()]) as pm:
            pm.catch_up()  # a welcoming saga for each customer
        assert orchestrator.run_pending() == 0
        for saga, saga_id in [("onboarding", "o-q7"), ("welcoming", SUBJECT)]:
            done = orchestrator.state(saga, saga_id)
            assert done.status == "completed"
            assert done.data["name"] == NAME
            assert done.results["welcome"]["greeting"] == f"Dear {NAME}"
        # Everything so far: the 2 customers' events, and 4 of each saga (onboarding, a
        # welcoming for each customer).
        nothing = [RetentionPolicy("audit", max_age=timedelta(days=3650))]
        assert retention.apply(store, nothing, [], str(archive)).archived == 2 + 3 * 4


@pytest.mark.slow
def test_a_forget_and_a_rebuild_leave_the_subjects_plaintext_nowhere(
    shared_store_url: str, tmp_path: Path, run: Run
) -> None:
    archive = tmp_path / "archive"
    _seed(shared_store_url, archive)
    store = ("--store", shared_store_url)
    before = database_text(shared_store_url, tmp_path)
    assert all(text.encode() in before for text in PLAIN)  # the scan sees what is there

    discarded = run(
        *store, "messaging", "discard", "orders-in", "m-unnamed", "--reason", "gdpr", "--yes"
    )
    assert discarded.code == 0, discarded.err
    done = run(*store, *APP, "forget", SUBJECT, "--yes")
    assert done.code == 0, done.err
    rebuilt = run(*store, *APP, "projections", "rebuild", "customer-names", "--yes")
    assert rebuilt.code == 0, rebuilt.err

    after = database_text(shared_store_url, tmp_path)
    archived = archive_text(archive)
    for text in PLAIN:
        assert text.encode() not in after, f"{text!r} is still in the database"
        assert text.encode() not in archived, f"{text!r} is still in the archive"
    assert OTHER.encode() in after  # the other customer's failed message is still there
    assert b"o-q7" in after and b"o-q7" in archived  # the scans see the sagas' events
    with EventStore.open(shared_store_url) as opened:
        orchestrator = Orchestrator(opened, forget_app.app.sagas)
        for saga, saga_id in [("onboarding", "o-q7"), ("welcoming", SUBJECT)]:
            forgotten = orchestrator.state(saga, saga_id)
            assert forgotten.data["name"] == FORGOTTEN
            assert forgotten.results["welcome"]["greeting"] == FORGOTTEN
