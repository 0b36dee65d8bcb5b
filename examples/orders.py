"""An order: place, add lines, pay, ship, or cancel before it ships."""

from __future__ import annotations

from typing import Literal

from eventcraft.domain import Aggregate, DomainError, DomainEvent, EventRegistry, State, evolves
from pydantic import Field

order_events = EventRegistry()

Status = Literal["new", "placed", "paid", "shipped", "cancelled"]


@order_events.event("OrderPlaced")
class OrderPlaced(DomainEvent):
    customer_id: str


@order_events.event("OrderLineAdded")
class LineAdded(DomainEvent):
    sku: str
    quantity: int = Field(gt=0)
    unit_price_cents: int = Field(ge=0)


@order_events.event("OrderPaid")
class OrderPaid(DomainEvent):
    amount_cents: int


@order_events.event("OrderShipped")
class OrderShipped(DomainEvent):
    carrier: str


@order_events.event("OrderCancelled")
class OrderCancelled(DomainEvent):
    reason: str


class OrderError(DomainError):
    """A command the order refuses."""


class OrderState(State):
    customer_id: str = ""
    status: Status = "new"
    lines: tuple[LineAdded, ...] = ()

    @property
    def total_cents(self) -> int:
        return sum(line.quantity * line.unit_price_cents for line in self.lines)

    @evolves
    def placed(self, event: OrderPlaced) -> OrderState:
        return self.replace(customer_id=event.customer_id, status="placed")

    @evolves
    def line_added(self, event: LineAdded) -> OrderState:
        return self.replace(lines=(*self.lines, event))

    @evolves
    def paid(self, event: OrderPaid) -> OrderState:
        return self.replace(status="paid")

    @evolves
    def shipped(self, event: OrderShipped) -> OrderState:
        return self.replace(status="shipped")

    @evolves
    def cancelled(self, event: OrderCancelled) -> OrderState:
        return self.replace(status="cancelled")


class Order(Aggregate[OrderState]):
    category = "order"
    registry = order_events

    def place(self, customer_id: str) -> None:
        self._require("new", "place")
        self.record(OrderPlaced(customer_id=customer_id))

    def add_line(self, sku: str, quantity: int, unit_price_cents: int) -> None:
        self._require("placed", "add a line to")
        self.record(LineAdded(sku=sku, quantity=quantity, unit_price_cents=unit_price_cents))

    def pay(self, amount_cents: int) -> None:
        self._require("placed", "pay")
        if not self.state.lines:
            raise OrderError(f"order {self.id!r} has no lines to pay for")
        if amount_cents != self.state.total_cents:
            raise OrderError(
                f"order {self.id!r} costs {self.state.total_cents}, not {amount_cents}"
            )
        self.record(OrderPaid(amount_cents=amount_cents))

    def ship(self, carrier: str) -> None:
        self._require("paid", "ship")
        self.record(OrderShipped(carrier=carrier))

    def cancel(self, reason: str) -> None:
        if self.state.status not in ("placed", "paid"):
            raise OrderError(f"order {self.id!r} is {self.state.status}: it cannot be cancelled")
        self.record(OrderCancelled(reason=reason))

    def _require(self, status: Status, action: str) -> None:
        if self.state.status != status:
            raise OrderError(
                f"cannot {action} order {self.id!r}: it is {self.state.status}, not {status}"
            )
