"""Reading about projections no runner has set up yet writes nothing: the pages and
`projections status` say they never ran, and the read-model database stays as it was."""

from __future__ import annotations

import orjson
import pytest
import sqlalchemy as sa
from eventcraft.eventstore import EventStore
from eventcraft.projections import Database
from starlette.testclient import TestClient

from eventcraft.console import create_app

from ..cli.apps import shop
from ..cli.conftest import Run, fill
from .conftest import APP, LOCAL


def _tables(store: EventStore) -> set[str]:
    database = Database.of(None, store)
    try:
        with database.reading() as connection:
            return set(sa.inspect(connection).get_table_names())
    finally:
        database.close()


def test_pages_and_status_of_projections_never_run_write_nothing(
    shared_store_url: str, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    with EventStore.open(shared_store_url) as store:
        fill(store)
        before = _tables(store)
        with TestClient(create_app(store, shop), base_url=LOCAL) as console:
            for path in (
                "/",
                "/projections",
                "/projections/orders",
                "/projections/order-notes",
                "/log?projection=orders",
                "/sagas",
                "/messaging",
            ):
                assert console.get(path).status_code == 200, path
            assert _tables(store) == before
            listed = console.get("/projections").text
            assert listed.count("never run") == 2
            shown = console.get("/projections/orders").text
            assert "never run" in shown and 'id="checkpoint">0<' in shown
        # never run, each lags by every event of the log it reads
        read = {
            d.name: sum(1 for e in store.read_all() if e.type in (d.types or (e.type,)))
            for d in shop.projections
        }
    status = run("--store", shared_store_url, "--app", APP, "projections", "status", "--json")
    assert status.code == 0, status.err
    states = orjson.loads(status.out)
    assert [(s["name"], s["position"], s["lag_events"], s["never_run"]) for s in states] == [
        ("orders", 0, read["orders"], True),
        ("order-notes", 0, read["order-notes"], True),
    ]
    monkeypatch.setenv("COLUMNS", "200")  # the table's rows unfolded
    table = run("--store", shared_store_url, "--app", APP, "projections", "status")
    assert table.out.count("never run") == 2
    parked = run("--store", shared_store_url, "--app", APP, "projections", "parked", "--json")
    assert (parked.code, parked.out.strip()) == (0, "[]")
    with EventStore.open(shared_store_url) as store:
        assert _tables(store) == before
