"""An App for the projections and sagas commands, and the history that puts its projections
and sagas in every state an operator meets: current, stopped on a parked event, completed,
parked, running.

The App names no store: commands are given `--store`. A handler and a compensation
fail until `HEALED` is set in the environment, so that a retry can succeed, in this
process or in a subprocess.
"""

from __future__ import annotations

import os
from typing import Any

import sqlalchemy as sa
from eventcraft.eventstore import EventStore, NewEvent, RecordedEvent
from eventcraft.projections import ErrorPolicy, Fold, Projection, ReadModel, State
from eventcraft.sagas import Orchestrator, RetryPolicy, Saga, Step, StepContext, wait_for

from eventcraft import App

from .conftest import fill

HEALED = "EVENTCRAFT_TEST_HEALED"

metadata = sa.MetaData()

orders_table = sa.Table(
    "cli_orders",
    metadata,
    sa.Column("order_id", sa.Text, primary_key=True),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("cents", sa.BigInteger, nullable=False),
)

notes_table = sa.Table(
    "cli_order_notes",
    metadata,
    sa.Column("position", sa.BigInteger, primary_key=True),
    sa.Column("customer", sa.Text, nullable=False),
    sa.Column("cents", sa.BigInteger, nullable=False),
)


def _evolve(state: State, event: RecordedEvent) -> State:
    if event.type == "OrderPlaced":
        return {**state, "status": "placed", "cents": event.data["cents"]}
    return {**state, "status": event.type.removeprefix("Order").lower()}


orders = Fold(
    "orders",
    table=orders_table,
    types=["OrderPlaced", "OrderPaid", "OrderCancelled"],
    key=lambda event: event.stream_id,
    initial=lambda key: {"order_id": key, "status": "new", "cents": 0},
    apply=_evolve,
)

notes = Projection(
    "order-notes", tables=[notes_table], on_error=ErrorPolicy(attempts=1, backoff=0, then="stop")
)


@notes.on("OrderPlaced")
def _noted(read_model: ReadModel, event: RecordedEvent) -> None:
    if event.data["cents"] < 0 and not os.environ.get(HEALED):
        raise ValueError(f"a negative amount: {event.data['cents']}")
    read_model.execute(
        sa.insert(read_model[notes_table]).values(
            position=event.position, customer=event.data["customer"], cents=event.data["cents"]
        )
    )


def _done(data: dict[str, Any], context: StepContext) -> dict[str, str]:
    return {"done": f"{context.step}:{context.saga_id}"}


def _refund(data: dict[str, Any], context: StepContext) -> None:
    if not os.environ.get(HEALED):
        raise ConnectionError("payments is down")


def _refuse(data: dict[str, Any], context: StepContext) -> None:
    raise RuntimeError("no courier")


fulfilment = Saga("fulfilment", [Step("reserve", _done), Step("charge", _done)])
"""Completes."""

payout = Saga(
    "payout",
    [
        Step("charge", _done, _refund, compensation_retry=RetryPolicy(1)),
        Step("ship", _refuse, fails_on=(RuntimeError,)),
    ],
)
"""Its second step fails, and the first one's compensation fails until healed: it parks."""

delivery = Saga("delivery", [Step("dispatch", _done), wait_for("receipt", "ParcelReceived")])
"""Waits for a signal that never comes: it keeps running."""

shop = App(projections=[orders, notes], sagas=[fulfilment, payout, delivery])

POISON = ("order-3", "OrderPlaced", {"customer": "eve", "cents": -5})
"""The event `order-notes` fails on (at position 7, after conftest's HISTORY)."""


def fill_shop(store: EventStore) -> int:
    """HISTORY, the poison event and one after it; the poison event's position."""
    fill(store)
    stream, type_, data = POISON
    done = store.append(stream, [NewEvent(type_, data)])
    store.append("order-4", [NewEvent("OrderPlaced", {"customer": "fay", "cents": 50})])
    return done.positions[0]


def run_sagas(store: EventStore) -> None:
    """One instance of each saga, run as far as each goes: f1 completed, p1 and p2
    parked, d1 running."""
    orchestrator = Orchestrator(store, shop.sagas)
    orchestrator.start(fulfilment, {"order": "1"}, saga_id="f1")
    orchestrator.start(payout, {"order": "2"}, saga_id="p1")
    orchestrator.start(payout, {"order": "3"}, saga_id="p2")
    orchestrator.start(delivery, {"order": "4"}, saga_id="d1")
    orchestrator.run_pending()
