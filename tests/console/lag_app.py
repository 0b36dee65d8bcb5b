"""An App whose projections read a few event types of a log full of others: what their lag
counts is what they would apply, not the positions behind the head."""

from __future__ import annotations

import sqlalchemy as sa
from eventcraft.eventstore import EventStore, NewEvent, Query, QueryItem, RecordedEvent
from eventcraft.projections import Projection, ReadModel

from eventcraft import App

metadata = sa.MetaData()

wanted_table = sa.Table(
    "lag_wanted", metadata, sa.Column("position", sa.BigInteger, primary_key=True)
)
kept_table = sa.Table("lag_kept", metadata, sa.Column("position", sa.BigInteger, primary_key=True))

wanted = Projection("wanted", tables=[wanted_table], categories=["order"])
"""Reads `Wanted` events of orders, by the category and type indexes."""

kept = Projection("kept", tables=[kept_table], query=Query([QueryItem(tags=["keep"])]))
"""Reads `Wanted` events tagged `keep`, by a query."""


@wanted.on("Wanted")
def _wanted(read_model: ReadModel, event: RecordedEvent) -> None:
    read_model.execute(sa.insert(read_model[wanted_table]).values(position=event.position))


@kept.on("Wanted")
def _kept(read_model: ReadModel, event: RecordedEvent) -> None:
    read_model.execute(sa.insert(read_model[kept_table]).values(position=event.position))


app = App(projections=[wanted, kept])

NOISE = 300
"""Events of other types (and `Wanted` of another category) that neither projection reads."""


def noise(store: EventStore) -> None:
    """`NOISE` events neither projection reads, some tagged `keep` as a query's would be."""
    store.append("click-1", [NewEvent("Clicked", {"n": n}) for n in range(NOISE - 2)])
    store.append("click-1", [NewEvent("Clicked", {}, tags=["keep"])])
    store.append("cart-1", [NewEvent("Wanted", {})])  # a type it reads, not its category


def wanted_events(store: EventStore, count: int, *, kept: int) -> None:
    """`count` `Wanted` events of orders, the first `kept` of them tagged `keep`."""
    store.append(
        "order-1",
        [NewEvent("Wanted", {"n": n}, tags=["keep"] if n < kept else []) for n in range(count)],
    )
