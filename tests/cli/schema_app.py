"""An App whose events are checked by `eventcraft schema`: the code as committed."""

from __future__ import annotations

from typing import Annotated

import sqlalchemy as sa
from eventcraft.domain import Aggregate, DomainEvent, EventRegistry, State, evolves
from eventcraft.eventstore import Personal
from eventcraft.projections import Fold, StreamKey
from eventcraft.sagas import Saga, Step, wait_for

from eventcraft import App

shop = EventRegistry()


@shop.event("OrderPlaced")
class OrderPlaced(DomainEvent):
    customer_id: str
    email: Annotated[str, Personal(subject="customer_id")]
    cents: int
    note: str = ""


@shop.event("OrderShipped")
class OrderShipped(DomainEvent):
    carrier: str


class OrderState(State):
    cents: int = 0

    @evolves
    def placed(self, event: OrderPlaced) -> OrderState:
        return self.replace(cents=event.cents)


class Order(Aggregate[OrderState]):
    category = "order"
    registry = shop


totals = sa.Table(
    "schema_totals",
    sa.MetaData(),
    sa.Column("order_id", sa.Text, primary_key=True),
    sa.Column("cents", sa.BigInteger, nullable=False),
)

order_totals = Fold(
    "order-totals",
    table=totals,
    types=["OrderPlaced"],
    key=StreamKey("order-"),
    initial=lambda key: {"order_id": key, "cents": 0},
    apply=lambda row, event: {**row, "cents": event.data["cents"]},
)

delivery = Saga(
    "delivery",
    [Step("book", lambda data, context: None), wait_for("shipped", "OrderShipped")],
)

app = App(projections=[order_totals], sagas=[delivery], registry=shop)
