"""Dropping a tenant removes everything of it (its schema, database or file, and all in
it: events, snapshots, deletions, keys, retention runs, read models kept there, and the
archive its retention runs wrote), and nothing of any other tenant."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa
from eventcraft.eventstore import (
    FORGOTTEN,
    EventStore,
    InvalidTenant,
    NewEvent,
    StoreUnavailable,
    Tenants,
)
from eventcraft.eventstore.retention import RetentionPolicy
from eventcraft.eventstore.testing.personal import Registered
from eventcraft.projections import Fold, ProjectionRunner, StreamKey
from eventcraft.projections.database import engine_for

from eventcraft.operations import retention

from ..conftest import PG_URL, _need_postgres

TOTALS = sa.Table(
    "order_totals",
    sa.MetaData(),
    sa.Column("order_id", sa.Text, primary_key=True),
    sa.Column("events", sa.Integer, nullable=False),
)


def fill(store: EventStore, archive: Path) -> None:
    """Something of everything a tenant's store keeps."""
    for n in range(3):
        store.append(f"order-{n}", [NewEvent("Placed", {"n": n}, tags=["course:c1"])])
    store.append("order-0", [NewEvent("Paid", {})])
    store.save_snapshot("order-0", version=2, type="Order", data={"paid": True})
    store.delete_stream("order-2")
    registered = Registered(customer_id="c1", name="Ada", age=36, plan="pro")
    store.append("customer-c1", [NewEvent("Registered", registered)])
    totals = Fold(
        "order-totals",
        table=TOTALS,
        key=StreamKey("order-"),
        initial=lambda key: {"order_id": key, "events": 0},
        apply=lambda row, event: {**row, "events": row["events"] + 1},
    )
    with ProjectionRunner(store, [totals]) as runner:
        runner.catch_up()
    keep = [RetentionPolicy("order", max_count=1)]
    retention.apply(store, keep, [], str(archive))


def intact(store: EventStore) -> None:
    """What `fill` left, read back whole."""
    assert [e.type for e in store.read_stream("order-0")] == ["Paid"]  # retention kept one
    assert store.stream_version("order-2") == 0  # deleted
    snapshot = store.load_snapshot("order-0")
    assert snapshot is not None and snapshot.data == {"paid": True}
    (customer,) = store.read_stream("customer-c1")
    assert customer.data["name"] == "Ada"
    assert store.retention.runs()[-1].up_to == store.low_water_mark() > 0


@pytest.fixture
def prefix() -> Iterator[str]:
    _need_postgres()
    prefix = f"d_{uuid.uuid4().hex[:10]}"
    yield prefix
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        for (schema,) in conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (f"{prefix}\\_%",)
        ).fetchall():
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
        for (database,) in conn.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE %s", (f"{prefix}\\_%",)
        ).fetchall():
            conn.execute(f'DROP DATABASE "{database}"')


def _named(kind: str, prefix: str) -> list[str]:
    catalog = "pg_namespace WHERE nspname" if kind == "schema" else "pg_database WHERE datname"
    column = "nspname" if kind == "schema" else "datname"
    with psycopg.connect(PG_URL) as conn:
        rows = conn.execute(
            f"SELECT {column} FROM {catalog} LIKE %s ORDER BY 1", (f"{prefix}\\_%",)
        ).fetchall()
    return [row[0] for row in rows]


@pytest.mark.parametrize("kind", ["schema", "database"])
@pytest.mark.slow
def test_dropping_a_tenant_on_postgres_leaves_nothing_of_it(
    kind: str, prefix: str, tmp_path: Path
) -> None:
    server = PG_URL.rsplit("/", 1)[0]
    template = {
        "schema": f"{PG_URL}?schema={prefix}_{{tenant}}",
        "database": f"{server}/{prefix}_{{tenant}}",
    }[kind]
    with Tenants(template, most_open=1) as tenants:
        for tenant in ["acme", "globex"]:
            fill(tenants.for_tenant(tenant), tmp_path / f"{tenant}-archive")
        assert _named(kind, prefix) == [f"{prefix}_acme", f"{prefix}_globex"]
        dropped = tenants.for_tenant("acme").drop_tenant()
        assert (dropped.place.kind, dropped.place.name) == (kind, f"{prefix}_acme")
        assert dropped.existed and dropped.archives == (str(tmp_path / "acme-archive"),)
        assert _named(kind, prefix) == [f"{prefix}_globex"]
        assert sorted(p.name for p in tmp_path.iterdir()) == ["globex-archive"]
        globex = tenants.for_tenant("globex")
        intact(globex)
        assert _read_model(globex.url) == {"0": 2, "1": 1, "2": 1, "customer-c1": 1}
        assert tenants.for_tenant("acme").high_water_mark() == 0  # a new tenant, empty


def _read_model(url: str) -> dict[str, int]:
    """The read model the projection kept in the tenant's own database (its default)."""
    engine = engine_for(url)
    with engine.connect() as conn:
        rows = conn.execute(sa.select(TOTALS.c.order_id, TOTALS.c.events)).all()
    engine.dispose()
    return {order: count for order, count in rows}


def test_dropping_a_tenant_on_sqlite_removes_its_files_and_folder(tmp_path: Path) -> None:
    (tmp_path / "tenants").mkdir()
    template = f"sqlite:///{tmp_path}/tenants/{{tenant}}/events.db"
    with Tenants(template, most_open=1) as tenants:
        for tenant in ["acme", "globex"]:
            fill(tenants.for_tenant(tenant), tmp_path / "tenants" / tenant / "archive")
        acme = tmp_path / "tenants" / "acme"
        assert {p.name for p in acme.iterdir()} >= {"events.db", "archive"}
        dropped = tenants.for_tenant("acme").drop_tenant()
        assert dropped.archives == (str(acme / "archive"),)
        assert sorted(p.name for p in (tmp_path / "tenants").iterdir()) == ["globex"]
        intact(tenants.for_tenant("globex"))


def test_a_tenant_store_opened_alone_drops_its_tenant(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/{{tenant}}.db?tenant=acme"
    with EventStore.open(url.replace("acme", "globex")) as globex:
        globex.append("order-1", [NewEvent("Placed", {})])
    acme = EventStore.open(url)
    acme.append("order-1", [NewEvent("Placed", {})])
    acme.retention.low_water_mark()  # its retention's lock file is the tenant's too
    dropped = acme.drop_tenant()
    assert (dropped.place.name, dropped.existed) == (f"{tmp_path}/acme.db", True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["globex.db"]
    with pytest.raises(StoreUnavailable, match="the event store is closed"):
        acme.stream_version("order-1")


def test_a_memory_tenant_is_dropped_with_its_keys() -> None:
    with Tenants("memory://") as tenants:
        acme, globex = tenants.for_tenant("acme"), tenants.for_tenant("globex")
        registered = Registered(customer_id="c1", name="Ada", age=36, plan="pro")
        for store in (acme, globex):
            store.append("customer-c1", [NewEvent("Registered", registered)])
        assert acme.drop_tenant().existed
        again = tenants.for_tenant("acme")
        assert (again.high_water_mark(), again.forget("c1")) == (0, 0)
        assert [e.data["name"] for e in globex.read_all()] == ["Ada"]
        assert globex.forget("c1") == 1
        assert [e.data["name"] for e in globex.read_all()] == [FORGOTTEN]


def test_the_untenanted_store_is_never_dropped(tmp_path: Path) -> None:
    tenants = Tenants(f"sqlite:///{tmp_path}/{{tenant}}.db")
    with EventStore.open(f"sqlite:///{tmp_path}/shop.db", tenants=tenants) as shop:
        shop.append("signup-1", [NewEvent("SignedUp", {"tenant": "acme"})])
        acme = shop.for_tenant("acme")
        acme.append("order-1", [NewEvent("Placed", {})])
        with pytest.raises(InvalidTenant, match="never the un-tenanted store"):
            shop.drop_tenant()
        assert shop.stream_version("signup-1") == 1
        acme.drop_tenant()
        assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".db") == ["shop.db"]
    with pytest.raises(StoreUnavailable, match="the event store is closed"):
        tenants.for_tenant("acme")  # closed with the store it was given to


def test_retention_policies_are_counted_per_tenant(tmp_path: Path) -> None:
    """Retention of one tenant removes nothing of another's (its runs are its own)."""
    with Tenants(f"sqlite:///{tmp_path}/{{tenant}}.db") as tenants:
        acme, globex = tenants.for_tenant("acme"), tenants.for_tenant("globex")
        for store in (acme, globex):
            for _ in range(3):
                store.append("order-1", [NewEvent("Placed", {})])
        keep = [RetentionPolicy("order", max_age=timedelta(seconds=1), max_count=1)]
        retention.apply(acme, keep, [], str(tmp_path / "archive"))
        assert acme.low_water_mark() == 3 and globex.low_water_mark() == 0
        assert len(list(globex.read_all())) == 3 and globex.retention.runs() == []
