"""The App of schema_app.py after a change that breaks stored events: OrderPlaced's `note`
removed and `currency` added, required, at the same version; OrderShipped's `carrier`
narrowed to a few names; and its personal `email` made plain."""

from __future__ import annotations

from typing import Literal

from eventcraft.domain import DomainEvent, EventRegistry

from eventcraft import App

shop = EventRegistry()


@shop.event("OrderPlaced")
class OrderPlaced(DomainEvent):
    customer_id: str
    email: str
    cents: int
    currency: str


@shop.event("OrderShipped")
class OrderShipped(DomainEvent):
    carrier: Literal["dhl", "ups"]


app = App(registry=shop)
