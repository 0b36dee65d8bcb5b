"""Operating projections: status, catch-up, rebuild, and parked events retried or discarded,
as operations on every backend and as `eventcraft projections ...` commands."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from eventcraft.eventstore import EventStore
from eventcraft.projections import ProjectionRunner

from eventcraft import App
from eventcraft.cli import projection_commands, shell
from eventcraft.operations import NotFound, Problems
from eventcraft.operations import projections as operations

from . import apps
from .apps import HEALED, fill_shop, run_sagas, shop
from .conftest import Outcome, Run

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.cli.apps:shop"


def _notes(store: EventStore) -> dict[int, int]:
    """The `order-notes` read model: cents by position."""
    with (
        ProjectionRunner(store, shop.projections) as runner,
        runner.database.reading() as connection,
    ):
        rows = connection.execute(sa.select(apps.notes_table)).all()
    return {row.position: row.cents for row in rows}


@pytest.fixture
def poison(store: EventStore) -> int:
    """The shop's history in `store`, its projections caught up as far as they go; the
    position `order-notes` stopped at."""
    position = fill_shop(store)
    operations.catch_up(store, shop)
    return position


@pytest.fixture
def shop_url(shared_store_url: str) -> str:
    """The shop's history and sagas on SQLite and PostgreSQL, its projections caught up:
    `order-notes` stopped on the event at position 7."""
    with EventStore.open(shared_store_url) as store:
        assert fill_shop(store) == 7
        run_sagas(store)
        operations.catch_up(store, shop)
    return shared_store_url


@pytest.fixture
def shop_cli(run: Run, shop_url: str, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Outcome]:
    monkeypatch.setenv("COLUMNS", "200")  # tables as wide as they like

    def run_on_shop(*arguments: str) -> Outcome:
        return run("--store", shop_url, "--app", APP, *arguments)

    return run_on_shop


# The operations, on every backend.


def test_status_shows_each_projection_behind_until_caught_up(store: EventStore) -> None:
    fill_shop(store)
    head = store.high_water_mark()
    before = operations.status(store, shop)
    # each lags by the events of the log it reads: its types'
    read = {
        d.name: sum(1 for e in store.read_all() if e.type in (d.types or ()))
        for d in shop.projections
    }
    assert [(s.name, s.kind, s.position, s.lag_events) for s in before] == [
        ("orders", "fold", 0, read["orders"]),
        ("order-notes", "projection", 0, read["order-notes"]),
    ]
    done = operations.catch_up(store, shop)
    assert [(c.name, c.before, c.after, c.held_by) for c in done] == [
        ("orders", 0, head, None),
        ("order-notes", 0, 6, None),
    ]
    assert done[0].stopped is None
    assert done[1].stopped is not None and "stopped at position 7" in done[1].stopped


def test_a_failing_handler_parks_its_event_and_stops_the_projection(
    store: EventStore, poison: int
) -> None:
    orders, notes = operations.status(store, shop)
    assert (orders.lag_events, orders.parked, orders.stopped_at) == (0, 0, None)
    assert (notes.position, notes.parked, notes.stopped_at) == (poison - 1, 1, poison)
    (parked,) = operations.parked(store, shop)
    assert (parked.projection, parked.position, parked.stream_id, parked.type) == (
        "order-notes",
        poison,
        "order-3",
        "OrderPlaced",
    )
    assert parked.error == "ValueError: a negative amount: -5" and parked.attempts == 1
    assert operations.parked(store, shop, "orders") == []
    assert operations.parked_event(store, shop, "order-notes", poison) == parked


def test_unknown_names_and_positions_are_not_found(store: EventStore, poison: int) -> None:
    with pytest.raises(NotFound, match=r"no projection 'nope' in the app \(it has: orders, order"):
        operations.parked(store, shop, "nope")
    with pytest.raises(NotFound, match="has no event parked at position 3"):
        operations.parked_event(store, shop, "order-notes", 3)
    with pytest.raises(NotFound):
        operations.catch_up(store, shop, ["nope"])
    with pytest.raises(NotFound):
        operations.rebuild(store, shop, "nope")


def test_a_retried_event_leaves_the_error_store_and_reaches_the_read_model(
    store: EventStore, poison: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(Problems, match="failed again, and stays parked: ValueError"):
        operations.retry_parked(store, shop, "order-notes", poison)
    assert len(operations.parked(store, shop)) == 1
    monkeypatch.setenv(HEALED, "1")
    settled = operations.retry_parked(store, shop, "order-notes", poison)
    assert (settled.action, settled.checkpoint, settled.parked_left) == ("retried", poison, 0)
    assert operations.parked(store, shop) == []
    assert _notes(store)[poison] == -5
    operations.catch_up(store, shop, ["order-notes"])
    (notes,) = [s for s in operations.status(store, shop) if s.name == "order-notes"]
    assert (notes.lag_events, notes.stopped_at) == (0, None)
    assert sorted(_notes(store)) == [1, 4, poison, poison + 1]


def test_a_discarded_event_is_never_applied(store: EventStore, poison: int) -> None:
    settled = operations.discard_parked(store, shop, "order-notes", poison)
    assert (settled.action, settled.parked_left) == ("discarded", 0)
    with pytest.raises(Problems, match="no longer"):
        operations.discard_parked(store, shop, "order-notes", poison)
    operations.catch_up(store, shop)
    assert sorted(_notes(store)) == [1, 4, poison + 1]


def test_a_rebuild_replays_into_a_new_generation(store: EventStore, poison: int) -> None:
    done = operations.rebuild(store, shop, "orders")
    assert (done.name, done.generation, done.position) == ("orders", 2, store.high_water_mark())
    with pytest.raises(Problems, match="rebuild of 'order-notes' failed, the old tables"):
        operations.rebuild(store, shop, "order-notes")
    assert [s.generation for s in operations.status(store, shop)] == [2, 1]


# The commands, on SQLite and PostgreSQL.


def test_status_and_parked_print_tables_and_json_that_match_the_store(
    shop_url: str, shop_cli: Callable[..., Outcome]
) -> None:
    with EventStore.open(shop_url) as store:
        expected = operations.status(store, shop)
        head = store.high_water_mark()
    shown = shop_cli("projections", "status", "--json")
    assert shown.code == 0 and shown.err == ""
    found = json.loads(shown.out)
    assert [
        (s["name"], s["kind"], s["position"], s["head"], s["parked"], s["stopped_at"])
        for s in found
    ] == [("orders", "fold", head, head, 0, None), ("order-notes", "projection", 6, head, 1, 7)]
    assert [s["generation"] for s in found] == [s.generation for s in expected]
    table = shop_cli("projections", "status").out
    assert "order-notes" in table and "stopped at 7" in table and "current" in table
    parked = json.loads(shop_cli("projections", "parked", "--json").out)
    assert [(p["projection"], p["position"], p["type"]) for p in parked] == [
        ("order-notes", 7, "OrderPlaced")
    ]
    assert parked[0]["error"] == "ValueError: a negative amount: -5"
    assert "Traceback" in parked[0]["traceback"]
    assert "a negative amount" in shop_cli("projections", "parked", "order-notes").out


def test_retry_asks_applies_and_exits_1_when_the_handler_fails_again(
    shop_url: str, shop_cli: Callable[..., Outcome], monkeypatch: pytest.MonkeyPatch
) -> None:
    refused = shop_cli("projections", "retry", "order-notes", "7")
    assert (refused.code, refused.err) == (
        2,
        "error: there is no terminal to confirm this at: pass --yes to go ahead\n",
    )
    monkeypatch.setattr(shell, "interactive", lambda: True)
    monkeypatch.setattr(sys, "stdin", io.StringIO("n\n"))
    declined = shop_cli("projections", "retry", "order-notes", "7")
    assert (declined.code, declined.err) == (1, "error: aborted: nothing was done\n")
    assert "Apply the OrderPlaced at position 7 (order-3 v1) to 'order-notes'" in declined.out
    failed = shop_cli("projections", "retry", "order-notes", "7", "--yes")
    assert failed.code == 1 and failed.err.count("\n") == 1
    assert "the event at position 7 failed again, and stays parked" in failed.err
    monkeypatch.setenv(HEALED, "1")
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))
    retried = shop_cli("projections", "retry", "order-notes", "7")
    assert retried.code == 0 and "retried: the event at position 7 is applied" in retried.out
    assert json.loads(shop_cli("projections", "parked", "--json").out) == []
    with EventStore.open(shop_url) as store:
        assert _notes(store)[7] == -5


def test_discard_rechecks_that_the_event_is_still_parked(
    shop_url: str, shop_cli: Callable[..., Outcome], monkeypatch: pytest.MonkeyPatch
) -> None:
    def discarded_meanwhile(question: str, yes: bool) -> None:
        with EventStore.open(shop_url) as store:
            operations.discard_parked(store, shop, "order-notes", 7)

    monkeypatch.setattr(projection_commands, "confirmed", discarded_meanwhile)
    late = shop_cli("projections", "discard", "order-notes", "7", "--yes")
    assert late.code == 1
    assert late.err == (
        "error: projection 'order-notes' has no event parked at 7 "
        "(no longer: it was retried or discarded meanwhile)\n"
    )
    gone = shop_cli("projections", "discard", "order-notes", "7", "--yes")
    assert (gone.code, gone.err) == (
        2,
        "error: projection 'order-notes' has no event parked at position 7\n",
    )


def test_catch_up_and_rebuild(shop_url: str, shop_cli: Callable[..., Outcome]) -> None:
    stopped = shop_cli("projections", "catch-up", "--json")
    assert stopped.code == 1
    assert stopped.err == (
        "error: projection 'order-notes' stopped at position 7: ValueError: a negative amount: -5\n"
    )
    assert [c["name"] for c in json.loads(stopped.out)] == ["orders", "order-notes"]
    current = shop_cli("projections", "catch-up", "orders")
    assert current.code == 0 and "orders" in current.out
    asked = shop_cli("projections", "rebuild", "orders")
    assert asked.code == 2 and "pass --yes" in asked.err
    rebuilt = shop_cli("projections", "rebuild", "orders", "--yes")
    assert rebuilt.code == 0 and "rebuilt orders: generation 2 serves" in rebuilt.out
    failed = shop_cli("projections", "rebuild", "order-notes", "--yes")
    assert failed.code == 1 and "the old tables still serve" in failed.err


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            ("catch-up", "nope"),
            "error: no projection 'nope' in the app (it has: orders, order-notes)",
        ),
        (("rebuild", "nope", "--yes"), "error: no projection 'nope' in the app"),
        (("parked", "nope"), "error: no projection 'nope' in the app"),
        (("retry", "nope", "7", "--yes"), "error: no projection 'nope' in the app"),
        (("discard", "orders", "7", "--yes"), "error: projection 'orders' has no event parked at"),
        (("retry", "order-notes", "seven"), "error: Invalid value for 'POSITION': 'seven'"),
        (("retry", "order-notes", "0"), "error: Invalid value for 'POSITION'"),
        (("retry", "order-notes"), "error: Missing argument 'POSITION'"),
    ],
)
def test_each_usage_error_is_one_line_and_exit_2(
    shop_cli: Callable[..., Outcome], arguments: tuple[str, ...], message: str
) -> None:
    outcome = shop_cli("projections", *arguments)
    assert outcome.code == 2 and outcome.err.startswith(message)
    assert outcome.err.count("\n") == 1 and outcome.out == ""


def test_the_app_is_required_and_may_name_the_store(
    shop_url: str, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = run("--store", shop_url, "projections", "status")
    assert (missing.code, missing.err) == (
        2,
        "error: this command needs the service's definitions: "
        "give --app MODULE:NAME or set EVENTCRAFT_APP\n",
    )
    wrong = run("--store", shop_url, "--app", "tests.cli.apps:nothing", "projections", "status")
    assert wrong.code == 2 and wrong.err.startswith("error: cannot load the app")
    here = App(store=shop_url, projections=shop.projections)
    monkeypatch.setattr(apps, "here", here, raising=False)
    monkeypatch.setenv("EVENTCRAFT_APP", "tests.cli.apps:here")
    found = json.loads(run("projections", "status", "--json").out)
    assert [s["name"] for s in found] == ["orders", "order-notes"]


@pytest.mark.slow
def test_the_installed_command_prints_json_and_one_line_errors(shop_url: str) -> None:
    def eventcraft(*arguments: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "eventcraft", "--store", shop_url, "--app", APP, *arguments],
            capture_output=True,
            text=True,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
        )

    status = eventcraft("projections", "status", "--json")
    assert status.returncode == 0 and status.stderr == ""
    assert [s["stopped_at"] for s in json.loads(status.stdout)] == [None, 7]
    refused = eventcraft("projections", "discard", "order-notes", "7")
    assert (refused.returncode, refused.stderr.count("\n")) == (2, 1)
    assert "pass --yes" in refused.stderr
    failed = eventcraft("projections", "retry", "order-notes", "7", "--yes")
    assert failed.returncode == 1 and failed.stderr.count("\n") == 1
    assert "Traceback" not in failed.stderr
    helped = eventcraft("projections", "retry", "--help")
    assert helped.returncode == 0 and "projections retry balances 1042" in helped.stdout
