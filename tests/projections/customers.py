"""Customers with personal fields, and read models of their names: the forgetting tests'
models, for the in-process runner and for Spark alike (importable by its workers)."""

from __future__ import annotations

from typing import Annotated, Any

import sqlalchemy as sa
from eventcraft.eventstore import NewEvent, Personal, RecordedEvent
from eventcraft.projections import Fold, StreamKey
from eventcraft.projections.reducers import Count, Last, ReducerFold
from pydantic import BaseModel

PLAIN = {"ada": ("Ada Lovelace", "ada@analytical.example"), "bob": ("Bob Dylan", "bob@x.ex")}
"""Each customer's name and email: what must be nowhere once the customer is forgotten."""


class Registered(BaseModel):
    name: Annotated[str, Personal()]  # the customer's stream names the subject
    email: Annotated[str, Personal()]
    plan: str


def registrations() -> dict[str, list[NewEvent]]:
    """Each customer's stream and its events: registered twice, the second time renamed."""
    return {
        f"customer-{who}": [
            NewEvent("Registered", Registered(name=name, email=email, plan="gold")),
            NewEvent("Registered", Registered(name=f"{name} Jr", email=email, plan="silver")),
        ]
        for who, (name, email) in PLAIN.items()
    }


metadata = sa.MetaData()
names = sa.Table(
    "customer_names",
    metadata,
    sa.Column("customer", sa.Text, primary_key=True),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("email", sa.Text, nullable=False),
    sa.Column("plan", sa.Text, nullable=False),
)
last_names = sa.Table(
    "customer_last_names",
    metadata,
    sa.Column("customer", sa.Text, primary_key=True),
    sa.Column("name", sa.Text),
    sa.Column("registrations", sa.BigInteger),
)


def _registered(state: dict[str, Any], event: RecordedEvent) -> dict[str, Any]:
    data = event.data
    return {**state, "name": data["name"], "email": data["email"], "plan": data["plan"]}


customer_names = Fold(
    "customer-names",
    table=names,
    categories="customer",
    key=StreamKey("customer-"),
    initial=lambda key: {"customer": key, "name": "", "email": "", "plan": ""},
    apply=_registered,
)

customer_last_names = ReducerFold(
    "customer-last-names",
    table=last_names,
    categories="customer",
    key=StreamKey("customer-"),
    columns={"name": Last("name"), "registrations": Count()},
)
