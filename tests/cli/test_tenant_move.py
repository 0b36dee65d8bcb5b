"""`eventcraft tenant move TENANT --to TEMPLATE`: refused without --yes (nothing written),
then the tenant's log copied to its place under TEMPLATE, the checkpoints of its App's
read models carried, its old place kept unless --drop-source; a mistake is one line on
stderr, never a traceback."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import orjson
import psycopg
import pytest
import sqlalchemy as sa
from eventcraft.eventstore import EventStore, NewEvent, PostgresTarget, RecordedEvent
from eventcraft.eventstore.sql.schema import POSITION_SEQUENCE
from eventcraft.projections import Projection, ReadModel

from eventcraft import App
from eventcraft.operations import tenants as operations

from ..conftest import PG_URL, _need_postgres
from .conftest import Outcome, Run, fill

SEEN = sa.Table(
    "moved_seen",
    sa.MetaData(),
    sa.Column("event_id", sa.Text, primary_key=True),  # an event applied twice is refused
)
seen = Projection("seen", tables=[SEEN])


@seen.on("OrderPlaced")
@seen.on("PaymentTaken")
@seen.on("OrderPaid")
@seen.on("ParcelSent")
@seen.on("OrderCancelled")
def _seen(read_model: ReadModel, event: RecordedEvent) -> None:
    read_model.execute(sa.insert(read_model[SEEN]).values(event_id=str(event.id)))


moving = App(projections=[seen], database="sqlite:///read-models/{tenant}.db")
"""An App keeping each tenant's read models in a database of their own (relative to the
test's folder)."""


@pytest.fixture
def prefix() -> Iterator[str]:
    _need_postgres()
    prefix = f"mv{uuid.uuid4().hex[:8]}_"
    yield prefix
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        for (schema,) in conn.execute(
            "SELECT nspname FROM pg_namespace WHERE starts_with(nspname, %s)", (prefix,)
        ).fetchall():
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture
def places(tmp_path: Path, prefix: str, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """acme in a schema whose positions have gaps, and globex beside it; the SQLite files
    they may move to."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tenants").mkdir()
    (tmp_path / "read-models").mkdir()
    source = f"{PG_URL}?schema={prefix}{{tenant}}"
    for tenant in ["acme", "globex"]:
        with EventStore.open(operations.tenant_url(source, tenant)) as store:
            store.stream_version("order-1")  # its schema made
            with psycopg.connect(PG_URL, autocommit=True) as conn:
                sequence = f"{PostgresTarget.from_url(store.url).schema}.{POSITION_SEQUENCE}"
                conn.execute("SELECT nextval(%s::regclass), nextval(%s::regclass)", (sequence,) * 2)
            fill(store)
    return source, "sqlite:///tenants/{tenant}.db"


def _one_line_error(outcome: Outcome, code: int, fragment: str) -> str:
    assert outcome.code == code, (outcome.out, outcome.err)
    assert outcome.err.startswith("error: ") and outcome.err.count("\n") == 1, outcome.err
    assert "Traceback" not in outcome.err and fragment in outcome.err, outcome.err
    return outcome.err


def test_tenant_move_refuses_without_yes_and_writes_nothing(
    places: tuple[str, str], run: Run, tmp_path: Path
) -> None:
    source, destination = places
    refused = _one_line_error(
        run("--store", source, "tenant", "move", "acme", "--to", destination), 2, "--yes"
    )
    assert "acme" in refused and "tenants/acme.db" in refused and "schema" in refused
    assert list((tmp_path / "tenants").iterdir()) == []


def test_tenant_move_copies_the_log_and_keeps_the_old_place(
    places: tuple[str, str], run: Run, tmp_path: Path
) -> None:
    source, destination = places
    moved = run("--store", source, "tenant", "move", "acme", "--to", destination, "--yes")
    assert moved.code == 0, moved.err
    assert "moved tenant 'acme' to its file tenants/acme.db: 6 events" in moved.out
    assert "no --app given" in moved.out and "is kept" in moved.out
    assert operations.list_tenants(destination) == ["acme"]
    assert operations.list_tenants(source) == ["acme", "globex"]
    old = run("--store", source, "--tenant", "acme", "log", "--json")
    new = run("--store", destination, "--tenant", "acme", "log", "--json")
    fields = ["id", "stream_id", "version", "type", "data", "metadata", "recorded_at", "tags"]

    def events(outcome: Outcome) -> list[dict[str, object]]:
        lines = [orjson.loads(line) for line in outcome.out.splitlines()]
        return [{f: e[f] for f in fields} for e in lines]

    assert events(new) == events(old) and len(events(new)) == 6
    assert [orjson.loads(e)["position"] for e in new.out.splitlines()] == list(range(1, 7))
    again = run("--store", source, "tenant", "move", "acme", "--to", destination, "--yes", "--json")
    assert again.code == 0, again.err
    report = orjson.loads(again.out)
    assert (report["events"], report["written"], report["resumed"]) == (6, 0, True)
    assert report["to"] == {"tenant": "acme", "kind": "file", "place": "tenants/acme.db"}


def test_tenant_move_carries_the_apps_checkpoints_and_drops_the_source_when_asked(
    places: tuple[str, str], run: Run, tmp_path: Path
) -> None:
    source, destination = places
    app = ("--app", "tests.cli.test_tenant_move:moving")
    caught_up = run("--store", source, "--tenant", "acme", *app, "projections", "catch-up")
    assert caught_up.code == 0, caught_up.err
    with EventStore.open(operations.tenant_url(source, "acme")) as acme:  # served on
        acme.append("order-3", [NewEvent("OrderPlaced", {"cents": 5})])
        everything = sorted(str(e.id) for e in acme.read_all())
    moved = run(
        "--store", source, *app, "tenant", "move", "acme", "--to", destination, "--yes",
        "--drop-source",
    )  # fmt: skip
    assert moved.code == 0, moved.err
    assert "checkpoint seen: 8 -> 6" in moved.out  # 6 events after two unused positions
    assert f"dropped its old schema {operations.place_of(source, 'acme').name}" in moved.out
    assert operations.list_tenants(source) == ["globex"]
    caught_up = run("--store", destination, "--tenant", "acme", *app, "projections", "catch-up")
    assert caught_up.code == 0, caught_up.err
    engine = sa.create_engine(f"sqlite:///{tmp_path}/read-models/acme.db")
    with engine.connect() as connection:
        applied = sorted(connection.execute(sa.select(SEEN.c.event_id)).scalars())
    engine.dispose()
    assert applied == everything  # each event once, before the move or after it


def test_tenant_move_refuses_a_destination_holding_another_log(
    places: tuple[str, str], run: Run
) -> None:
    source, destination = places
    with EventStore.open(operations.tenant_url(destination, "acme")) as there:
        there.append("cart-1", [NewEvent("ItemAdded", {})])
    _one_line_error(
        run("--store", source, "tenant", "move", "acme", "--to", destination, "--yes"),
        2,
        "holds events that are not the source's",
    )
    with EventStore.open(operations.tenant_url(destination, "acme")) as there:
        assert [e.stream_id for e in there.read_all()] == ["cart-1"]
    assert operations.list_tenants(source) == ["acme", "globex"]


TO = "sqlite:///tenants/{tenant}.db"


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        (("tenant", "move", "initech", "--to", TO, "--yes"), "no tenant 'initech'"),
        (("tenant", "move", "acme", "--to", "sqlite:///one.db", "--yes"), "is one store"),
        (("tenant", "move", "acme", "--to", "SOURCE", "--yes"), "under both templates"),
        (("--tenant", "globex", "tenant", "move", "acme", "--to", TO), "name one tenant"),
        (("tenant", "move", "../acme", "--to", TO, "--yes"), "tenant id"),
        (("tenant", "move", "ACME", "--to", TO, "--yes"), "tenant id"),
        (("tenant", "move", "acme'; DROP SCHEMA public; --", "--to", TO, "--yes"), "tenant id"),
    ],
)
def test_tenant_move_mistakes_are_one_line_and_change_nothing(
    places: tuple[str, str], run: Run, tmp_path: Path, arguments: tuple[str, ...], fragment: str
) -> None:
    source, _ = places
    typed = tuple(source if argument == "SOURCE" else argument for argument in arguments)
    _one_line_error(run("--store", source, *typed), 2, fragment)
    assert list((tmp_path / "tenants").iterdir()) == []
    assert not (tmp_path / "one.db").exists()
    assert operations.list_tenants(source) == ["acme", "globex"]
