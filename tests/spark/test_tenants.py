"""Spark on a tenant's store: a replay reads one tenant's log and writes that tenant's read
model, in the tenant's own place, never a file or schema named by the template's text; and
`read_events` over several tenants gives each row its tenant (issue 55)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from eventcraft.eventstore import NewEvent, Tenants, tenant_place
from eventcraft.projections import DefinitionError, Fold, ProjectionRunner, StreamKey
from eventcraft.projections.spark import read_events, replay

from ..conftest import PG_URL, _need_postgres

totals = sa.Table(
    "totals",
    sa.MetaData(),
    sa.Column("order_id", sa.Text, primary_key=True),
    sa.Column("cents", sa.BigInteger, nullable=False),
)
order_totals = Fold(
    "order-totals",
    table=totals,
    key=StreamKey("order-"),
    initial=lambda key: {"order_id": key, "cents": 0},
    apply=lambda row, event: {**row, "cents": row["cents"] + event.data["cents"]},
)
ORDERS = {"acme": [("order-1", 1250), ("order-1", 50), ("order-2", 7)], "globex": [("order-1", 90)]}


@pytest.fixture(params=["sqlite", "postgres"])
def template(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """Each tenant's place: a file, or a schema read by Spark's JDBC source."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/{{tenant}}.db"
        return
    _need_postgres()
    prefix = f"sp_{tmp_path.name[-8:].lower().replace('-', '_')}"
    yield f"{PG_URL}?schema={prefix}_{{tenant}}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        for tenant in ORDERS:
            conn.execute(f'DROP SCHEMA IF EXISTS "{prefix}_{tenant}" CASCADE')


def _append(template: str) -> None:
    with Tenants(template) as tenants:
        for tenant, orders in ORDERS.items():
            store = tenants.for_tenant(tenant)
            for stream_id, cents in orders:
                store.append(stream_id, [NewEvent("Placed", {"cents": cents})])


def _separator(template: str) -> str:
    return "&" if "?" in template else "?"


def test_a_replay_of_one_tenant_writes_its_read_model_in_its_own_place(
    spark: Any, template: str, tmp_path: Path
) -> None:
    _append(template)
    acme = f"{template}{_separator(template)}tenant=acme"
    report = replay(order_totals, acme, spark=spark)
    assert (report.events, report.rows) == (3, 2)
    with Tenants(template) as tenants:
        for tenant, expected in [("acme", [("1", 1300), ("2", 7)]), ("globex", None)]:
            with ProjectionRunner(tenants.for_tenant(tenant), [order_totals]) as runner:
                if expected is None:  # globex was not replayed: its runner starts afresh
                    assert runner.status()[0].position == 0
                    continue
                assert runner.status()[0].position == report.replayed_to
                with runner.database.reading() as connection:
                    rows = connection.execute(sa.select(totals).order_by("order_id")).all()
                assert [tuple(row) for row in rows] == expected
    # Nothing was made under the template's own text.
    assert not list(tmp_path.glob("{tenant}*"))


def test_read_events_over_tenants_gives_each_row_its_tenant(spark: Any, template: str) -> None:
    _append(template)
    events = read_events(spark, template, tenants=["acme", "globex"])
    rows = sorted(
        (row["tenant"], row["stream_id"], row["position"])
        for row in events.select("tenant", "stream_id", "position").collect()
    )
    assert rows == [
        ("acme", "order-1", 1),
        ("acme", "order-1", 2),
        ("acme", "order-2", 3),
        ("globex", "order-1", 1),
    ]
    acme_only = read_events(spark, f"{template}{_separator(template)}tenant=acme")
    assert acme_only.count() == 3 and "tenant" not in acme_only.columns


def test_tenants_need_a_template_and_a_template_needs_tenants(spark: Any, tmp_path: Path) -> None:
    with pytest.raises(DefinitionError, match=r"\{tenant\}"):
        read_events(spark, f"sqlite:///{tmp_path}/shop.db", tenants=["acme"])
    with pytest.raises(DefinitionError, match="tenants="):
        read_events(spark, f"sqlite:///{tmp_path}/{{tenant}}.db")
    for hostile in ["../etc", "acme&schema=public", "", "a" * 200, "acme\n"]:
        with pytest.raises(DefinitionError, match="tenant"):
            read_events(spark, f"sqlite:///{tmp_path}/{{tenant}}.db", tenants=[hostile])
    assert not list(tmp_path.iterdir())  # nothing opened, nothing made
    assert tenant_place(f"sqlite:///{tmp_path}/shop.db") is None
