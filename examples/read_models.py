"""Read models of the bank and order examples: declared once, run by any runner.

`account_balances` is a per-key fold (pure functions, the shape a Spark
replay runs too); `orders_by_customer` is a projection with a handler per
event type. Both read typed events through the examples' registries, so a
version-1 deposit is upcast here exactly as it is for the aggregate.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from eventcraft.eventstore import RecordedEvent
from eventcraft.projections import Fold, Projection, ReadModel, State, StreamKey

from examples.bank import AccountClosed, AccountOpened, MoneyDeposited, MoneyWithdrawn, bank_events
from examples.orders import LineAdded, OrderPlaced, order_events

metadata = sa.MetaData()

balances = sa.Table(
    "account_balances",
    metadata,
    sa.Column("account_id", sa.Text, primary_key=True),
    sa.Column("owner", sa.Text, nullable=False),
    sa.Column("balance_cents", sa.BigInteger, nullable=False),
    sa.Column("is_open", sa.Boolean, nullable=False),
)


def _opened(account_id: Any) -> State:
    return {"account_id": account_id, "owner": "", "balance_cents": 0, "is_open": False}


def _evolve_balance(state: State, recorded: RecordedEvent) -> State:
    event = bank_events.decode(recorded)
    if isinstance(event, AccountOpened):
        return {**state, "owner": event.owner, "is_open": True}
    if isinstance(event, MoneyDeposited):
        return {**state, "balance_cents": state["balance_cents"] + event.amount_cents}
    if isinstance(event, MoneyWithdrawn):
        return {**state, "balance_cents": state["balance_cents"] - event.amount_cents}
    if isinstance(event, AccountClosed):
        return {**state, "is_open": False}
    return state


account_balances = Fold(
    "account-balances",
    table=balances,
    categories="account",
    types=sorted(bank_events.types),
    key=StreamKey("account-"),  # a key Spark computes without calling Python
    initial=_opened,
    apply=_evolve_balance,
)

orders = sa.Table(
    "orders_by_customer",
    metadata,
    sa.Column("order_id", sa.Text, primary_key=True),
    sa.Column("customer_id", sa.Text, nullable=False),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("lines", sa.Integer, nullable=False),
    sa.Column("total_cents", sa.BigInteger, nullable=False),
    sa.Index("orders_by_customer_status", "customer_id", "status"),
)

orders_by_customer = Projection("orders-by-customer", tables=[orders], categories="order")


def _order_id(event: RecordedEvent) -> str:
    return event.stream_id.removeprefix("order-")


@orders_by_customer.on("OrderPlaced")
def _placed(read_model: ReadModel, recorded: RecordedEvent) -> None:
    event = order_events.decode(recorded)
    assert isinstance(event, OrderPlaced)
    read_model.execute(
        sa.insert(read_model[orders]).values(
            order_id=_order_id(recorded),
            customer_id=event.customer_id,
            status="placed",
            lines=0,
            total_cents=0,
        )
    )


@orders_by_customer.on("OrderLineAdded")
def _line_added(read_model: ReadModel, recorded: RecordedEvent) -> None:
    event = order_events.decode(recorded)
    assert isinstance(event, LineAdded)
    table = read_model[orders]
    read_model.execute(
        sa.update(table)
        .where(table.c.order_id == _order_id(recorded))
        .values(
            lines=table.c.lines + 1,
            total_cents=table.c.total_cents + event.quantity * event.unit_price_cents,
        )
    )


@orders_by_customer.on("OrderPaid", "OrderShipped", "OrderCancelled")
def _status_changed(read_model: ReadModel, recorded: RecordedEvent) -> None:
    status = {"OrderPaid": "paid", "OrderShipped": "shipped", "OrderCancelled": "cancelled"}
    table = read_model[orders]
    read_model.execute(
        sa.update(table)
        .where(table.c.order_id == _order_id(recorded))
        .values(status=status[recorded.type])
    )


READ_MODELS = [account_balances, orders_by_customer]
