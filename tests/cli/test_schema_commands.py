"""`eventcraft schema export|check|verify`, as a developer's CI and an operator run them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from eventcraft.domain import EventCatalog
from eventcraft.eventstore import EVENT_VERSION, EventStore, NewEvent

from eventcraft.operations import schema as operations

from . import schema_app
from .conftest import Run

APP = "tests.cli.schema_app:app"
CHANGED = "tests.cli.schema_app_changed:app"


@pytest.fixture(autouse=True)
def _importable(monkeypatch: pytest.MonkeyPatch) -> None:
    # `--app tests.cli...` is found from the current folder, as a user's module is.
    monkeypatch.chdir(Path(__file__).resolve().parent.parent.parent)


def test_export_prints_the_catalog_and_with_output_writes_it(run: Run, tmp_path: Path) -> None:
    printed = run("--app", APP, "schema", "export")
    assert printed.code == 0
    catalog = EventCatalog.from_json(printed.out)
    assert catalog == operations.catalog_of(schema_app.app)
    placed = catalog.types["OrderPlaced"]
    assert placed.readers.aggregates == ("order",)
    assert placed.readers.projections == ("order-totals",)
    assert catalog.types["OrderShipped"].readers.sagas == ("delivery",)
    assert placed.personal == {"email": "customer_id"}

    path = tmp_path / "events.schema.json"
    written = run("schema", "export", "--app", APP, "--output", str(path))
    assert (written.code, written.out.strip()) == (0, f"wrote 2 event types to {path}")
    assert path.read_text() == printed.out


def test_export_keeps_the_retired_types_of_the_catalog_it_replaces(
    run: Run, tmp_path: Path
) -> None:
    path = tmp_path / "events.schema.json"
    assert run("--app", APP, "schema", "export", "--output", str(path)).code == 0
    catalog = EventCatalog.read(path)
    kept = EventCatalog(
        {name: t for name, t in catalog.types.items() if name != "OrderShipped"},
        {"CouponAdded": catalog.types["OrderShipped"]},
    )
    kept.write(path)
    assert run("--app", APP, "schema", "export", "--output", str(path)).code == 0
    assert list(EventCatalog.read(path).retired) == ["CouponAdded"]


def test_export_will_not_replace_a_file_that_is_no_catalog_without_force(
    run: Run, tmp_path: Path
) -> None:
    path = tmp_path / "notes.json"
    path.write_text("my notes")
    refused = run("--app", APP, "schema", "export", "--output", str(path))
    assert refused.code == 2
    assert "notes.json' is not JSON" in refused.err
    assert refused.err.rstrip().endswith("; replace it with --force")
    assert "Traceback" not in refused.err
    assert path.read_text() == "my notes"
    assert run("--app", APP, "schema", "export", "--output", str(path), "--force").code == 0
    assert EventCatalog.read(path) == operations.catalog_of(schema_app.app)


def test_check_passes_on_the_same_code_and_fails_with_a_line_a_problem_and_upcasters(
    run: Run, tmp_path: Path
) -> None:
    path = tmp_path / "events.schema.json"
    assert run("--app", APP, "schema", "export", "--output", str(path)).code == 0
    same = run("--app", APP, "schema", "check", "--against", str(path))
    assert (same.code, same.out.strip()) == (
        0,
        f"ok: the App's events are backward compatible with {path}",
    )

    changed = run("schema", "check", "--app", CHANGED, "--against", str(path))
    assert changed.code == 1
    lines = changed.out.splitlines()
    assert lines[0] == f"4 incompatible change(s) against {path}:"
    assert [line.split(":")[0].strip() for line in lines[1:5]] == [
        "OrderPlaced v1 field 'note'",
        "OrderPlaced v1 field 'currency'",
        "OrderPlaced v1 field 'email'",
        "OrderShipped v1 field 'carrier'",
    ]
    assert '@registry.upcaster("OrderPlaced", from_version=1)' in changed.out
    assert changed.err.strip() == "error: schema check found 4 incompatible changes"


def test_check_in_json_lists_each_problem_with_its_fix(run: Run, tmp_path: Path) -> None:
    path = tmp_path / "events.schema.json"
    assert run("--app", APP, "schema", "export", "--output", str(path)).code == 0
    checked = run("--app", CHANGED, "schema", "check", "--against", str(path), "--json")
    assert checked.code == 1
    document = json.loads(checked.out)
    assert document["mode"] == "backward"
    first = document["problems"][0]
    assert (first["event_type"], first["field"], first["problem"]) == (
        "OrderPlaced",
        "note",
        "the field was removed",
    )
    assert first["fix"] == "bump the version to 2 and upcast v1 events"


def test_check_names_a_missing_or_bad_catalog_in_one_line(run: Run, tmp_path: Path) -> None:
    missing = run("--app", APP, "schema", "check", "--against", str(tmp_path / "none.json"))
    assert missing.code == 2
    assert missing.err.startswith("error: cannot read the catalog")
    assert "Traceback" not in missing.err


def test_check_needs_an_app_with_a_registry(run: Run, tmp_path: Path) -> None:
    found = run("--app", "tests.cli.apps:shop", "schema", "export")
    assert found.code == 2
    assert "the App names no event registry" in found.err


def _fill(url: str) -> None:
    with EventStore.open(url) as store:
        placed = schema_app.OrderPlaced(customer_id="c1", email="ann@example.com", cents=500)
        store.append("order-1", [schema_app.shop.to_new_event(placed, {})])
        store.append("order-2", [NewEvent("OrderPlaced", {"cents": 5}, {EVENT_VERSION: 1})])
        store.append("order-1", [NewEvent("OrderShipped", {"carrier": "dhl"})])


def test_verify_counts_each_type_and_version_and_exits_1_on_events_that_do_not_read(
    run: Run, shared_store_url: str
) -> None:
    _fill(shared_store_url)
    found = run("--store", shared_store_url, "--app", APP, "schema", "verify", "--json")
    assert found.code == 1
    document = json.loads(found.out)
    rows = [(c["event_type"], c["version"], c["events"], c["failed"]) for c in document["counts"]]
    assert rows == [("OrderPlaced", 1, 2, 1), ("OrderShipped", 1, 1, 0)]
    assert document["counts"][0]["first_failure"] == 2
    assert "Field required" in document["counts"][0]["error"]
    assert found.err.strip() == "error: schema verify found 1 event that does not read"

    table = run("--store", shared_store_url, "--app", APP, "schema", "verify")
    assert table.code == 1
    assert "OrderPlaced v1 at position 2: event 'OrderPlaced' at version 1 of stream 'order-2'" in (
        table.out.replace("\n", " ")
    )
    assert "failed: 3 events after position 0 up to 3, 1 failed" in table.out


def test_verify_of_a_log_that_reads_exits_0(run: Run, sqlite_url: str) -> None:
    with EventStore.open(sqlite_url) as store:
        store.append("order-1", [NewEvent("OrderShipped", {"carrier": "dhl"})])
    found = run("--store", sqlite_url, "--app", APP, "schema", "verify", "--sample", "10")
    assert found.code == 0
    assert "ok: sampled 1 event after position 0 up to 1, 0 failed" in found.out
