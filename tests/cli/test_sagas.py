"""Operating sagas: listing instances, one instance's timeline, and retry, resolve and cancel,
as operations on every backend and as `eventcraft sagas ...` commands."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from eventcraft.eventstore import EventStore

from eventcraft.cli import saga_commands, shell
from eventcraft.operations import InputError, NotFound, Problems
from eventcraft.operations import sagas as operations

from .apps import HEALED, run_sagas, shop
from .conftest import Outcome, Run

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.cli.apps:shop"


@pytest.fixture
def sagas(store: EventStore) -> EventStore:
    """`store` holding one instance of each of the shop's sagas: f1 completed, p1 and p2
    parked, d1 running."""
    run_sagas(store)
    return store


@pytest.fixture
def sagas_url(shared_store_url: str) -> str:
    with EventStore.open(shared_store_url) as store:
        run_sagas(store)
    return shared_store_url


@pytest.fixture
def shop_cli(run: Run, sagas_url: str, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Outcome]:
    monkeypatch.setenv("COLUMNS", "240")  # tables as wide as they like

    def run_on_shop(*arguments: str) -> Outcome:
        return run("--store", sagas_url, "--app", APP, *arguments)

    return run_on_shop


def _status(store: EventStore, name: str, saga_id: str) -> str:
    return operations.saga(store, shop, name, saga_id).saga.status


# The operations, on every backend.


def test_instances_are_listed_with_their_status_and_filtered(sagas: EventStore) -> None:
    listed = operations.instances(sagas, shop)
    assert [(s.name, s.saga_id, s.status, s.step) for s in listed] == [
        ("delivery", "d1", "running", "receipt"),
        ("fulfilment", "f1", "completed", "charge"),
        ("payout", "p1", "parked", "charge"),
        ("payout", "p2", "parked", "charge"),
    ]
    assert all(s.started_at <= s.updated_at for s in listed)
    parked = operations.instances(sagas, shop, status="parked")
    assert [s.saga_id for s in parked] == ["p1", "p2"]
    assert parked[0].parked_because == "ConnectionError('payments is down')"
    assert parked[0].failure == "step ship failed: RuntimeError('no courier')"
    assert [s.saga_id for s in operations.instances(sagas, shop, name="fulfilment")] == ["f1"]
    assert operations.parked(sagas, shop) == parked
    with pytest.raises(InputError, match="no saga status 'stuck'"):
        operations.instances(sagas, shop, status="stuck")
    with pytest.raises(NotFound, match=r"no saga 'nope' in the app \(it has: fulfilment, payout"):
        operations.instances(sagas, shop, name="nope")


def test_an_instance_shows_every_transition_with_its_idempotency_key(sagas: EventStore) -> None:
    found = operations.saga(sagas, shop, "payout", "p1")
    assert (found.data, found.correlation_id) == ({"order": "2"}, "p1")
    assert found.results == {"charge": {"done": "charge:p1"}}
    shown = [(t.type, t.step, t.attempt, t.idempotency_key) for t in found.transitions]
    key = "saga-payout:p1/"
    assert shown == [
        ("SagaStarted", None, None, None),
        ("StepStarted", "charge", 1, key + "charge"),
        ("StepSucceeded", "charge", None, key + "charge"),
        ("StepStarted", "ship", 1, key + "ship"),
        ("StepFailed", "ship", 1, key + "ship"),
        ("SagaFailed", None, None, None),
        ("CompensationStarted", "charge", 1, key + "charge/compensation"),
        ("CompensationFailed", "charge", 1, key + "charge/compensation"),
        ("SagaParked", "charge", None, None),
    ]
    stored = list(sagas.read_stream("saga-payout:p1"))
    assert [(t.version, t.position, t.data) for t in found.transitions] == [
        (e.version, e.position, e.data) for e in stored
    ]
    assert found.transitions[2].result == {"done": "charge:p1"}
    assert found.transitions[4].error == "RuntimeError('no courier')"
    with pytest.raises(NotFound, match="no 'payout' saga with id 'p9'"):
        operations.saga(sagas, shop, "payout", "p9")


def test_a_retry_that_fails_again_parks_it_again_and_one_that_succeeds_compensates(
    sagas: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(Problems, match="saga-payout:p1 was retried and is parked again"):
        operations.retry(sagas, shop, "payout", "p1")
    monkeypatch.setenv(HEALED, "1")
    assert operations.retry(sagas, shop, "payout", "p1").status == "compensated"
    with pytest.raises(Problems, match="saga-payout:p1 is compensated, not parked"):
        operations.retry(sagas, shop, "payout", "p1")
    assert [s.saga_id for s in operations.parked(sagas, shop)] == ["p2"]


def test_a_resolved_saga_keeps_the_note(sagas: EventStore) -> None:
    with pytest.raises(InputError, match="needs a note"):
        operations.resolve(sagas, shop, "payout", "p1", " ")
    done = operations.resolve(sagas, shop, "payout", "p1", "refunded by hand, ticket 981")
    assert done.status == "resolved"
    last = operations.saga(sagas, shop, "payout", "p1").transitions[-1]
    assert (last.type, last.note) == ("SagaResolved", "refunded by hand, ticket 981")
    with pytest.raises(Problems, match="saga-payout:p1 is resolved, not parked"):
        operations.resolve(sagas, shop, "payout", "p1", "again")


def test_a_cancelled_saga_compensates_and_only_a_running_one_cancels(sagas: EventStore) -> None:
    assert operations.cancel(sagas, shop, "delivery", "d1", "order withdrawn").status == (
        "compensating"
    )
    last = operations.saga(sagas, shop, "delivery", "d1").transitions[-1]
    assert (last.type, last.note) == ("SagaFailed", "cancelled: order withdrawn")
    with pytest.raises(Problems, match="saga-delivery:d1 is compensating, not running"):
        operations.cancel(sagas, shop, "delivery", "d1", "again")
    with pytest.raises(Problems, match="saga-fulfilment:f1 is completed, not running"):
        operations.expect(sagas, shop, "fulfilment", "f1", "running")


# The commands, on SQLite and PostgreSQL.


def test_list_show_and_parked_print_tables_and_json_that_match_the_store(
    sagas_url: str, shop_cli: Callable[..., Outcome]
) -> None:
    listed = shop_cli("sagas", "list", "--json")
    assert listed.code == 0 and listed.err == ""
    assert [(s["name"], s["saga_id"], s["status"]) for s in json.loads(listed.out)] == [
        ("delivery", "d1", "running"),
        ("fulfilment", "f1", "completed"),
        ("payout", "p1", "parked"),
        ("payout", "p2", "parked"),
    ]
    running = json.loads(shop_cli("sagas", "list", "--status", "running", "--json").out)
    assert [s["saga_id"] for s in running] == ["d1"]
    assert "payments is down" in shop_cli("sagas", "list", "--name", "payout").out
    parked = json.loads(shop_cli("sagas", "parked", "--json").out)
    assert [s["saga_id"] for s in parked] == ["p1", "p2"]
    shown = json.loads(shop_cli("sagas", "show", "payout", "p1", "--json").out)
    with EventStore.open(sagas_url) as store:
        stored = list(store.read_stream("saga-payout:p1"))
    assert [(t["type"], t["version"], t["data"]) for t in shown["transitions"]] == [
        (e.type, e.version, e.data) for e in stored
    ]
    assert shown["saga"]["status"] == "parked" and shown["data"] == {"order": "2"}
    assert [t["recorded_at"] for t in shown["transitions"]] == [
        e.recorded_at.isoformat() for e in stored
    ]
    timeline = shop_cli("sagas", "show", "payout", "p1").out
    assert "saga-payout:p1/charge/compensation" in timeline
    assert "ConnectionError('payments is down')" in timeline
    assert '{"done":"charge:p1"}' in timeline


def test_retry_resolve_and_cancel_ask_act_and_recheck(
    sagas_url: str, shop_cli: Callable[..., Outcome], monkeypatch: pytest.MonkeyPatch
) -> None:
    refused = shop_cli("sagas", "resolve", "payout", "p1", "--note", "by hand")
    assert (refused.code, refused.err) == (
        2,
        "error: there is no terminal to confirm this at: pass --yes to go ahead\n",
    )
    monkeypatch.setattr(shell, "interactive", lambda: True)
    monkeypatch.setattr(sys, "stdin", io.StringIO("n\n"))
    declined = shop_cli("sagas", "cancel", "delivery", "d1")
    assert (declined.code, declined.err) == (1, "error: aborted: nothing was done\n")
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))
    resolved = shop_cli("sagas", "resolve", "payout", "p1", "--note", "refunded by hand")
    assert resolved.code == 0 and "saga-payout:p1 resolved: refunded by hand" in resolved.out
    again = shop_cli("sagas", "resolve", "payout", "p1", "--note", "twice", "--yes")
    assert (again.code, again.err) == (1, "error: saga-payout:p1 is resolved, not parked\n")
    failed = shop_cli("sagas", "retry", "payout", "p2", "--yes")
    assert failed.code == 1 and failed.err.count("\n") == 1
    assert failed.err.startswith("error: saga-payout:p2 was retried and is parked again")
    monkeypatch.setenv(HEALED, "1")
    retried = shop_cli("sagas", "retry", "payout", "p2", "--yes")
    assert retried.code == 0 and "saga-payout:p2 retried: compensated" in retried.out
    cancelled = shop_cli("sagas", "cancel", "delivery", "d1", "--reason", "withdrawn", "--yes")
    assert cancelled.code == 0 and "compensating" in cancelled.out
    with EventStore.open(sagas_url) as store:
        assert _status(store, "payout", "p1") == "resolved"
        assert _status(store, "payout", "p2") == "compensated"
        assert _status(store, "delivery", "d1") == "compensating"
        resolution = operations.saga(store, shop, "payout", "p1").transitions[-1]
    assert resolution.note == "refunded by hand"


def test_an_action_on_an_instance_that_moved_while_confirming_exits_1(
    sagas_url: str, shop_cli: Callable[..., Outcome], monkeypatch: pytest.MonkeyPatch
) -> None:
    def resolved_meanwhile(question: str, yes: bool) -> None:
        with EventStore.open(sagas_url) as store:
            operations.resolve(store, shop, "payout", "p1", "by someone else")

    monkeypatch.setattr(saga_commands, "confirmed", resolved_meanwhile)
    late = shop_cli("sagas", "retry", "payout", "p1")
    assert (late.code, late.err) == (1, "error: saga-payout:p1 is resolved, not parked\n")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("show", "nope", "1"), "error: no saga 'nope' in the app (it has: fulfilment, payout,"),
        (("show", "payout", "p9"), "error: no 'payout' saga with id 'p9'"),
        (("list", "--name", "nope"), "error: no saga 'nope' in the app"),
        (("list", "--status", "stuck"), "error: Invalid value for '--status': 'stuck'"),
        (("retry", "payout", "p9", "--yes"), "error: no 'payout' saga with id 'p9'"),
        (("resolve", "payout", "p1"), "error: Missing option '--note'"),
        (("cancel", "nope", "d1", "--yes"), "error: no saga 'nope' in the app"),
        (("show", "payout"), "error: Missing argument 'ID'"),
    ],
)
def test_each_usage_error_is_one_line_and_exit_2(
    shop_cli: Callable[..., Outcome], arguments: tuple[str, ...], message: str
) -> None:
    outcome = shop_cli("sagas", *arguments)
    assert outcome.code == 2 and outcome.err.startswith(message)
    assert outcome.err.count("\n") == 1 and outcome.out == ""


@pytest.mark.slow
def test_the_installed_command_prints_json_and_one_line_errors(sagas_url: str) -> None:
    def eventcraft(*arguments: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "eventcraft", "--store", sagas_url, "--app", APP, *arguments],
            capture_output=True,
            text=True,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
        )

    listed = eventcraft("sagas", "list", "--status", "parked", "--json")
    assert listed.returncode == 0 and listed.stderr == ""
    assert [s["saga_id"] for s in json.loads(listed.stdout)] == ["p1", "p2"]
    refused = eventcraft("sagas", "retry", "payout", "p1")
    assert (refused.returncode, refused.stderr.count("\n")) == (2, 1)
    failed = eventcraft("sagas", "retry", "payout", "p1", "--yes")
    assert failed.returncode == 1 and failed.stderr.count("\n") == 1
    assert "Traceback" not in failed.stderr
    missing = subprocess.run(
        [sys.executable, "-m", "eventcraft", "--store", sagas_url, "sagas", "parked"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert missing.returncode == 2 and missing.stderr.startswith(
        "error: this command needs the service's definitions"
    )
