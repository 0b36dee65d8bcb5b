"""A projection runner on a PostgreSQL store behind PgBouncer in transaction pooling: its
read models, checkpoints and leases in the URL's schema, through the pooler."""

from __future__ import annotations

import psycopg
import pytest
import sqlalchemy as sa
from eventcraft.eventstore import EventStore, NewEvent, RecordedEvent
from eventcraft.projections import Projection, ProjectionRunner, ReadModel, checkpoint_positions

from tests.conftest import PG_URL
from tests.pgbouncer import pgbouncer, pgbouncer_url  # noqa: F401  (fixtures)

pytestmark = pytest.mark.postgres

totals = sa.Table(
    "pooled_totals",
    sa.MetaData(),
    sa.Column("customer", sa.Text, primary_key=True),
    sa.Column("cents", sa.BigInteger, nullable=False),
)


def _projection() -> Projection:
    by_customer = Projection("totals", tables=[totals])

    @by_customer.on("OrderPaid")
    def paid(read_model: ReadModel, event: RecordedEvent) -> None:
        table = read_model[totals]
        row = {"customer": event.data["customer"], "cents": event.data["cents"]}
        insert = sa.dialects.postgresql.insert(table).values(**row)
        read_model.execute(
            insert.on_conflict_do_update(
                index_elements=[table.c.customer], set_={"cents": table.c.cents + row["cents"]}
            )
        )

    return by_customer


@pytest.fixture
def pooled(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue("pgbouncer_url"))


def test_a_runner_catches_up_through_pgbouncer_into_the_urls_schema(pooled: str) -> None:
    schema = pooled.split("schema=", 1)[1].split("&", 1)[0]
    with EventStore.open(pooled) as store:
        for n in range(30):  # past psycopg's 5 executions before it would prepare
            customer = "ann" if n % 2 else "bob"
            store.append(f"order-{n}", [NewEvent("OrderPaid", {"customer": customer, "cents": n})])
        with ProjectionRunner(store, [_projection()]) as runner:
            runner.catch_up()
            assert checkpoint_positions(runner.database, ["totals"]) == {"totals": 30}
            with runner.database.reading() as connection:
                rows = dict(connection.execute(sa.select(totals.c.customer, totals.c.cents)).all())
            store.append("order-30", [NewEvent("OrderPaid", {"customer": "ann", "cents": 100})])
            runner.catch_up()
            with runner.database.reading() as connection:
                ann = connection.execute(
                    sa.select(totals.c.cents).where(totals.c.customer == "ann")
                ).scalar_one()
    assert rows == {"ann": sum(range(1, 30, 2)), "bob": sum(range(0, 30, 2))}
    assert ann == rows["ann"] + 100
    with psycopg.connect(PG_URL) as conn:  # in the URL's schema, not the pooler's default
        found = conn.execute(
            "SELECT DISTINCT schemaname FROM pg_tables WHERE tablename LIKE 'pooled_totals%%' "
            "AND schemaname IN (%s, 'public')",
            (schema,),
        ).fetchall()
    assert found == [(schema,)]
