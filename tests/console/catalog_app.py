"""An App with an event registry, for the Catalog pages and the Event page's typed view, and
a log holding each way a stored version meets today's code: read as is, upcast, without an
upcast path, newer than the code, not fitting its class, and of a type no class has."""

from __future__ import annotations

from typing import Annotated, Any

import sqlalchemy as sa
from eventcraft.domain import Aggregate, DomainEvent, EventRegistry, State, evolves
from eventcraft.eventstore import EVENT_VERSION, EventStore, NewEvent, Personal
from eventcraft.projections import Fold, StreamKey
from eventcraft.sagas import Saga, Step, wait_for

from eventcraft import App

shop = EventRegistry()


@shop.event("OrderPlaced", version=2)
class OrderPlaced(DomainEvent):
    customer_id: str
    email: Annotated[str, Personal(subject="customer_id")]
    cents: int


@shop.upcaster("OrderPlaced", from_version=1)
def _placed_in_cents(data: dict[str, Any]) -> dict[str, Any]:
    euros = data["euros"]
    return {**{k: v for k, v in data.items() if k != "euros"}, "cents": euros * 100}


@shop.event("OrderShipped", version=3)
class OrderShipped(DomainEvent):
    carrier: str


@shop.upcaster("OrderShipped", from_version=2)
def _shipped_v3(data: dict[str, Any]) -> dict[str, Any]:
    return data  # version 1 has no upcaster: its events cannot reach version 3


@shop.event("OrderCancelled")
class OrderCancelled(DomainEvent):
    reason: str


class OrderState(State):
    cents: int = 0

    @evolves
    def placed(self, event: OrderPlaced) -> OrderState:
        return self.replace(cents=event.cents)


class Order(Aggregate[OrderState]):
    category = "order"
    registry = shop


totals = sa.Table(
    "catalog_totals",
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

PLACED = OrderPlaced(customer_id="c1", email="ann@example.com", cents=1250)

AS_IS, UPCAST, UNFIT, NO_PATH, NEWER, UNREGISTERED = 1, 3, 4, 5, 6, 7
"""The positions of `fill`'s events by how today's code reads them (2: OrderShipped, as is)."""


def fill(store: EventStore) -> None:
    """The log of the module docstring, at the positions named above."""
    store.append(
        "order-1",
        [shop.to_new_event(PLACED, {}), shop.to_new_event(OrderShipped(carrier="dhl"), {})],
    )
    old = {"customer_id": "c2", "email": "bob@example.com", "euros": 5}
    store.append("order-2", [NewEvent("OrderPlaced", old, {EVENT_VERSION: 1})])
    store.append("order-3", [NewEvent("OrderPlaced", {"cents": 5}, {EVENT_VERSION: 2})])
    store.append("order-4", [NewEvent("OrderShipped", {"carrier": "ups"})])
    newer = {"customer_id": "c5", "email": "eve@example.com", "cents": 1, "currency": "EUR"}
    store.append("order-5", [NewEvent("OrderPlaced", newer, {EVENT_VERSION: 3})])
    store.append("coupon-1", [NewEvent("CouponAdded", {"code": "SPRING"})])
