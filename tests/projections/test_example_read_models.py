"""The examples' read models, fed through the examples' repositories, on every backend."""

from __future__ import annotations

import sqlalchemy as sa
from eventcraft.domain import EVENT_VERSION, Repository
from eventcraft.eventstore import EventStore, NewEvent
from eventcraft.projections import ProjectionRunner

from examples.bank import BankAccount
from examples.orders import Order
from examples.read_models import READ_MODELS, balances, orders


def test_balances_and_orders_by_customer_follow_the_aggregates(store: EventStore) -> None:
    accounts, shop = Repository(store, BankAccount), Repository(store, Order)
    accounts.execute("ann", lambda a: a.open("Ann", overdraft_limit_cents=500), create=True)
    accounts.execute("ann", lambda a: a.deposit(1000))
    accounts.execute("ann", lambda a: a.withdraw(1300))
    # A version-1 deposit (euros as a float) is upcast on its way into the read model.
    store.append("account-ann", [NewEvent("MoneyDeposited", {"amount": 2.5}, {EVENT_VERSION: 1})])
    accounts.execute("joe", lambda a: a.open("Joe", overdraft_limit_cents=0), create=True)
    accounts.execute("joe", lambda a: a.close())
    shop.execute("1", lambda o: o.place("ann"), create=True)
    shop.execute("1", lambda o: o.add_line("tea", 3, 200))
    shop.execute("1", lambda o: o.pay(600))
    shop.execute("2", lambda o: o.place("ann"), create=True)
    with ProjectionRunner(store, READ_MODELS, batch_size=3) as runner:
        runner.catch_up()
        query = sa.select(orders.c.order_id, orders.c.status, orders.c.total_cents).where(
            orders.c.customer_id == "ann"
        )
        with runner.database.reading() as connection:
            assert sorted(connection.execute(sa.select(balances))) == [
                ("ann", "Ann", -50, True),
                ("joe", "Joe", 0, False),
            ]
            assert sorted(connection.execute(query)) == [("1", "paid", 600), ("2", "placed", 0)]
            before = sorted(connection.execute(sa.select(orders)))
        runner.rebuild("orders-by-customer")
        with runner.database.reading() as connection:
            assert sorted(connection.execute(sa.select(orders))) == before
