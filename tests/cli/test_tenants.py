"""`--tenant` scopes every command to one tenant's store of a URL template with `{tenant}`;
`eventcraft tenant list` finds the tenants a template places, and `tenant drop` removes one
whole. Two tenants hold the same stream ids: a command under one never sees the other's."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import orjson
import psycopg
import pytest
import sqlalchemy as sa
from eventcraft.eventstore import FORGOTTEN, EventStore, NewEvent, Personal
from eventcraft.eventstore.retention import RetentionPolicy
from eventcraft.projections import Fold, ProjectionRunner, StreamKey
from pydantic import BaseModel

from eventcraft import App
from eventcraft.operations import retention
from eventcraft.operations import tenants as operations

from ..conftest import PG_URL, _need_postgres
from .apps import shop
from .conftest import Run, fill

GLOBEX_ONLY = "globex-zq81"
"""A value only globex's events hold."""


class Registered(BaseModel):
    name: Annotated[str, Personal()]


def _drop_named(prefix: str) -> None:
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        for (schema,) in conn.execute(
            "SELECT nspname FROM pg_namespace WHERE starts_with(nspname, %s)", (prefix,)
        ).fetchall():
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
        for (database,) in conn.execute(
            "SELECT datname FROM pg_database WHERE starts_with(datname, %s)", (prefix,)
        ).fetchall():
            conn.execute(f'DROP DATABASE "{database}" WITH (FORCE)')


@pytest.fixture
def prefix() -> Iterator[str]:
    """A prefix of PostgreSQL names of this test's alone; what has it is dropped after."""
    _need_postgres()
    prefix = f"ct{uuid.uuid4().hex[:8]}_"
    yield prefix
    _drop_named(prefix)


@pytest.fixture(params=["sqlite", "postgres"])
def template(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL template with `{tenant}`: a SQLite file per tenant, or a PostgreSQL schema."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/{{tenant}}.db"
    prefix = request.getfixturevalue("prefix")
    return f"{PG_URL}?schema={prefix}{{tenant}}"


def _tenant(template: str, tenant: str) -> EventStore:
    return EventStore.open(operations.tenant_url(template, tenant))


@pytest.fixture
def two(template: str) -> str:
    """acme holds the CLI's known history; globex holds events in the same streams (and
    the same customer subject), with values of its own."""
    with _tenant(template, "acme") as acme:
        fill(acme)
        acme.append("customer-ada", [NewEvent("Registered", Registered(name="Ada Acme"))])
    with _tenant(template, "globex") as globex:
        for stream in ["order-1", "payment-1", "order-2"]:
            globex.append(stream, [NewEvent("GlobexThing", {"mark": GLOBEX_ONLY})])
        globex.append("customer-ada", [NewEvent("Registered", Registered(name="Ada Globex"))])
    return template


def _lines(out: str) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in out.splitlines() if line.strip()]


def test_log_stats_show_and_export_under_tenant_see_that_tenants_events_alone(
    two: str, run: Run
) -> None:
    acme = ("--store", two, "--tenant", "acme")
    logged = run(*acme, "log", "--json")
    assert logged.code == 0, logged.err
    events = _lines(logged.out)
    assert len(events) == 7 and GLOBEX_ONLY not in logged.out
    assert "Ada Globex" not in logged.out
    stats = orjson.loads(run(*acme, "stats", "--json").out)
    globex_stats = orjson.loads(run("--store", two, "--tenant", "globex", "stats", "--json").out)
    assert stats != globex_stats
    assert '"events": 7' in run(*acme, "stats", "--json").out
    assert '"events": 4' in run("--store", two, "--tenant", "globex", "stats", "--json").out
    shown = run(*acme, "show", "order-1", "--json")
    assert [e["type"] for e in _lines(shown.out)] == ["OrderPlaced", "OrderPaid"]
    exported = run(*acme, "export", "--out", "-")
    assert exported.code == 0, exported.err
    assert len(exported.out.splitlines()) == 7 and GLOBEX_ONLY not in exported.out

    globex = run("--store", two, "--tenant", "globex", "log", "--json")
    assert [e["type"] for e in _lines(globex.out)] == ["GlobexThing"] * 3 + ["Registered"]
    assert "OrderPlaced" not in globex.out


def test_the_tenant_may_come_from_the_environment(
    two: str, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVENTCRAFT_STORE", two)
    monkeypatch.setenv("EVENTCRAFT_TENANT", "globex")
    logged = run("log", "--json")
    assert logged.code == 0, logged.err
    assert len(_lines(logged.out)) == 4 and GLOBEX_ONLY in logged.out


def test_forget_under_tenant_erases_that_tenants_key_alone(two: str, run: Run) -> None:
    acme = ("--store", two, "--tenant", "acme")
    done = run(*acme, "forget", "customer-ada", "--yes", "--json")
    assert done.code == 0, done.err
    assert orjson.loads(done.out)["erased"] == 1
    assert FORGOTTEN in run(*acme, "show", "customer-ada", "--json").out
    assert "Ada Acme" not in run(*acme, "log", "--json").out
    globex = run("--store", two, "--tenant", "globex", "show", "customer-ada", "--json")
    assert _lines(globex.out)[0]["data"] == {"name": "Ada Globex"}


def _one_line_error(outcome: object, code: int, *words: str) -> str:
    err = outcome.err  # type: ignore[attr-defined]
    assert outcome.code == code, err  # type: ignore[attr-defined]
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    for word in words:
        assert word in lines[0], err
    return str(lines[0])


def test_a_tenant_needs_a_template_and_a_template_needs_a_tenant(
    two: str, sqlite_url: str, run: Run
) -> None:
    _one_line_error(
        run("--store", sqlite_url, "--tenant", "acme", "log"), 2, "--tenant acme", "{tenant}"
    )
    for command in (["log"], ["stats"], ["export", "--out", "-"], ["forget", "x", "--yes"]):
        _one_line_error(run("--store", two, *command), 2, "--tenant TENANT", "tenant list")


@pytest.mark.parametrize(
    ("hostile", "said"),
    [
        ("Acme", "capital letters"),
        ("../globex", "path separator"),
        ("acme'; DROP SCHEMA public; --", 'holds "\'"'),
        ("a" * 60, "at most 48"),
        ("", "is empty"),
        ("acme\x01", "control character"),
    ],
)
def test_a_tenant_id_the_store_refuses_is_one_line_saying_why(
    two: str, run: Run, hostile: str, said: str
) -> None:
    line = _one_line_error(run("--store", two, "--tenant", hostile, "log"), 2, said)
    assert line.startswith("error: --tenant: tenant id ")


def test_a_tenant_without_a_store_is_not_made_by_reading_it(two: str, run: Run) -> None:
    _one_line_error(run("--store", two, "--tenant", "initech", "log"), 2, "no tenant 'initech'")
    assert operations.list_tenants(two) == ["acme", "globex"]


def test_tenant_list_shows_the_tenants_of_the_template(two: str, run: Run) -> None:
    listed = run("--store", two, "tenant", "list", "--json")
    assert listed.code == 0, listed.err
    assert [t["tenant"] for t in orjson.loads(listed.out)] == ["acme", "globex"]
    assert "password" not in listed.out and "postgresql://" not in listed.out
    table = run("--store", two, "tenant", "list")
    assert [line.split("\t")[0] for line in table.out.splitlines()] == [
        "tenant",
        "acme",
        "globex",
    ]


def test_tenant_list_wants_a_template(sqlite_url: str, run: Run) -> None:
    _one_line_error(run("--store", sqlite_url, "tenant", "list"), 2, "{tenant}")


TOTALS = sa.Table(
    "order_totals",
    sa.MetaData(),
    sa.Column("order_id", sa.Text, primary_key=True),
    sa.Column("events", sa.Integer, nullable=False),
)


def _with_read_model_and_archive(store: EventStore, archive: Path) -> None:
    """A read model kept in the tenant's store, and an archive its retention run wrote."""
    totals = Fold(
        "order-totals",
        table=TOTALS,
        key=StreamKey("order-"),
        initial=lambda key: {"order_id": key, "events": 0},
        apply=lambda row, event: {**row, "events": row["events"] + 1},
    )
    with ProjectionRunner(store, [totals]) as runner:
        runner.catch_up()
    retention.apply(store, [RetentionPolicy("order", max_count=1)], [], str(archive))


def test_tenant_drop_refuses_without_yes_then_removes_the_tenant_whole(
    two: str, run: Run, tmp_path: Path
) -> None:
    for tenant in ["acme", "globex"]:
        with _tenant(two, tenant) as store:
            _with_read_model_and_archive(store, tmp_path / f"{tenant}-archive")
    refused = _one_line_error(run("--store", two, "tenant", "drop", "acme"), 2, "--yes")
    place = operations.place_of(two, "acme")
    assert "tenant 'acme'" in refused and place.name in refused
    assert operations.list_tenants(two) == ["acme", "globex"]  # nothing was done

    dropped = run("--store", two, "tenant", "drop", "acme", "--yes")
    assert dropped.code == 0, dropped.err
    assert f"dropped tenant 'acme': removed its {place.kind} {place.name}" in dropped.out
    assert f"removed its archive {tmp_path / 'acme-archive'}" in dropped.out
    assert operations.list_tenants(two) == ["globex"]
    assert not (tmp_path / "acme-archive").exists() and (tmp_path / "globex-archive").is_dir()
    if place.kind == "schema":
        with psycopg.connect(PG_URL) as conn:  # the read model went with the schema
            found = conn.execute(
                "SELECT count(*) FROM pg_tables WHERE schemaname = %s", (place.name,)
            ).fetchone()
        assert found == (0,)
    else:
        assert not Path(place.name).exists()
    globex = run("--store", two, "--tenant", "globex", "log", "--json")
    assert GLOBEX_ONLY in globex.out

    again = run("--store", two, "tenant", "drop", "acme", "--yes")
    _one_line_error(again, 2, "no tenant 'acme'")
    as_json = run("--store", two, "tenant", "drop", "globex", "--yes", "--json")
    assert as_json.code == 0, as_json.err
    assert orjson.loads(as_json.out) == {
        "tenant": "globex",
        "kind": place.kind,
        "place": operations.place_of(two, "globex").name,
        "existed": True,
        "archives": [str(tmp_path / "globex-archive")],
        "read_models": None,  # no --app: they are in its store, dropped with it
    }
    assert operations.list_tenants(two) == []


def test_tenant_drop_refuses_a_second_tenant_named_by_tenant(two: str, run: Run) -> None:
    _one_line_error(
        run("--store", two, "--tenant", "globex", "tenant", "drop", "acme", "--yes"),
        2,
        "name one tenant",
    )
    assert operations.list_tenants(two) == ["acme", "globex"]


def test_tenant_drop_refuses_a_hostile_tenant_id(two: str, run: Run) -> None:
    for hostile in ["..", "acme/../globex", "ACME", "x" * 100]:
        _one_line_error(run("--store", two, "tenant", "drop", hostile, "--yes"), 2, "tenant id")
    assert operations.list_tenants(two) == ["acme", "globex"]


@pytest.mark.slow
def test_tenants_are_listed_from_folders_and_databases(tmp_path: Path, prefix: str) -> None:
    (tmp_path / "tenants").mkdir()
    server = PG_URL.rsplit("/", 1)[0]
    for template in (
        f"sqlite:///{tmp_path}/tenants/{{tenant}}/events.db",
        f"{server}/{prefix}{{tenant}}",
    ):
        for tenant in ["north-wind", "acme"]:
            with _tenant(template, tenant) as store:
                store.append("order-1", [NewEvent("OrderPlaced", {})])
        assert operations.list_tenants(template) == ["acme", "north-wind"]
    # A file or folder the template would not give a tenant is none.
    (tmp_path / "tenants" / "Not-A-Tenant").mkdir()
    (tmp_path / "tenants" / "empty").mkdir()
    assert operations.list_tenants(f"sqlite:///{tmp_path}/tenants/{{tenant}}/events.db") == [
        "acme",
        "north-wind",
    ]


def test_projections_under_tenant_keep_that_tenants_checkpoints(two: str, run: Run) -> None:
    app = ("--app", "tests.cli.apps:shop")
    caught_up = run("--store", two, "--tenant", "acme", *app, "projections", "catch-up")
    assert caught_up.code == 0, caught_up.err

    def checkpoints(tenant: str) -> dict[str, int]:
        status = run("--store", two, "--tenant", tenant, *app, "projections", "status", "--json")
        assert status.code == 0, status.err
        return {state["name"]: state["position"] for state in orjson.loads(status.out)}

    assert checkpoints("acme") == {"orders": 7, "order-notes": 7}
    assert checkpoints("globex") == {"orders": 0, "order-notes": 0}


def test_an_app_with_a_read_model_database_of_its_own_is_refused_under_tenant(
    two: str, run: Run
) -> None:
    shared = ("--store", two, "--tenant", "acme", "--app", f"{__name__}:SHARED")
    for command in (["projections", "status"], ["forget", "customer-ada", "--yes"]):
        _one_line_error(run(*shared, *command), 2, "App.database", "every tenant would share")


SHARED = App(database="sqlite:///read-models.db")
"""An App keeping the read models of every tenant in one database."""

PER_TENANT = App(
    projections=shop.projections, sagas=shop.sagas, database="sqlite:///rm-{tenant}.db"
)
"""An App keeping each tenant's read models in a database of the tenant's own."""


def test_an_app_database_with_tenant_is_each_tenants_own(
    two: str, run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    app = ("--app", f"{__name__}:PER_TENANT")
    caught_up = run("--store", two, "--tenant", "acme", *app, "projections", "catch-up")
    assert caught_up.code == 0, caught_up.err
    assert (tmp_path / "rm-acme.db").is_file() and not (tmp_path / "rm-{tenant}.db").exists()
    for tenant, position in [("acme", 7), ("globex", 0)]:
        status = run("--store", two, "--tenant", tenant, *app, "projections", "status", "--json")
        assert status.code == 0, status.err
        assert {state["position"] for state in orjson.loads(status.out)} == {position}


READS_APART = replace(PER_TENANT, database="sqlite:///reads/{tenant}.db")
"""An App keeping each tenant's read models in a file of its own, in a folder of their own."""


def test_tenant_drop_with_the_app_removes_the_tenants_read_model_database_too(
    two: str, run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read models kept in a database of the tenant's own (App.database with {tenant})
    are the tenant's data too: dropping the tenant leaves nothing of them."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "reads").mkdir()  # not beside the tenants' files: those are its tenants
    app = ("--app", f"{__name__}:READS_APART")
    for tenant in ["acme", "globex"]:
        caught_up = run("--store", two, "--tenant", tenant, *app, "projections", "catch-up")
        assert caught_up.code == 0, caught_up.err
    acme_models, globex_models = tmp_path / "reads/acme.db", tmp_path / "reads/globex.db"
    assert acme_models.is_file() and globex_models.is_file()
    globex_status = ("--store", two, "--tenant", "globex", *app, "projections", "status", "--json")
    before = orjson.loads(run(*globex_status).out)
    assert {state["position"] for state in before} != {0}

    refused = _one_line_error(run("--store", two, *app, "tenant", "drop", "acme"), 2, "--yes")
    assert "its read models' file reads/acme.db" in refused
    dropped = run("--store", two, *app, "tenant", "drop", "acme", "--yes", "--json")
    assert dropped.code == 0, dropped.err
    assert orjson.loads(dropped.out)["read_models"] == {
        "tenant": "acme",
        "kind": "file",
        "place": "reads/acme.db",
        "existed": True,
        "archives": [],
    }
    assert not acme_models.exists() and operations.list_tenants(two) == ["globex"]
    assert orjson.loads(run(*globex_status).out) == before  # globex's are untouched

    as_text = run("--store", two, *app, "tenant", "drop", "globex", "--yes")
    assert as_text.code == 0, as_text.err
    assert "removed its read models' file reads/globex.db" in as_text.out
    assert not globex_models.exists()
