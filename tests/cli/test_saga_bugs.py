"""A saga parked on a bug shows its traceback (`sagas show`, the operations' detail) and is
compensated on an operator's word (`sagas compensate`)."""

from __future__ import annotations

import pytest
from eventcraft.eventstore import FORGOTTEN, EventStore

from eventcraft.operations import InputError, Problems
from eventcraft.operations import sagas as operations

from .bug_app import EMAIL, SUBJECT, buggy, park_one
from .conftest import Run

APP = "tests.cli.bug_app:buggy"


def test_a_sagas_detail_holds_the_bug_it_parked_on_its_message_forgettable(
    store: EventStore,
) -> None:
    park_one(store)
    found = operations.saga(store, buggy, "ordering", "b1")
    assert found.saga.status == "parked" and found.bug is not None
    assert (found.bug.step, found.bug.error_type) == ("charge", "KeyError")
    assert found.bug.message == repr(EMAIL) and EMAIL not in found.bug.traceback
    assert "in _charge" in found.bug.traceback
    store.forget(SUBJECT)
    bug = operations.saga(store, buggy, "ordering", "b1").bug
    assert bug is not None and bug.message == FORGOTTEN and "in _charge" in bug.traceback


def test_an_operator_compensates_a_parked_saga_with_a_reason(store: EventStore) -> None:
    park_one(store)
    with pytest.raises(InputError):
        operations.compensate(store, buggy, "ordering", "b1", " ")
    done = operations.compensate(store, buggy, "ordering", "b1", "order withdrawn")
    assert done.status == "compensated" and "order withdrawn" in (done.failure or "")
    with pytest.raises(Problems, match="is compensated, not parked"):
        operations.compensate(store, buggy, "ordering", "b1", "again")


def test_sagas_show_prints_the_traceback_and_sagas_compensate_undoes_it(
    run: Run, shared_store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "240")
    with EventStore.open(shared_store_url) as store:
        park_one(store)
    shown = run("--store", shared_store_url, "--app", APP, "sagas", "show", "ordering", "b1")
    assert shown.code == 0, shown.err
    assert "KeyError" in shown.out and "in _charge" in shown.out
    assert "Traceback (most recent call last)" in shown.out
    arguments = ["sagas", "compensate", "ordering", "b1", "--reason", "withdrawn", "--yes"]
    done = run("--store", shared_store_url, "--app", APP, *arguments)
    assert done.code == 0, done.err
    assert "saga-ordering:b1 compensated: compensated" in done.out
    again = run("--store", shared_store_url, "--app", APP, *arguments)
    assert again.code == 1 and "not parked" in again.err and "Traceback" not in again.err
