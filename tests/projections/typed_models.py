"""Read models given the bank example's registry: they read typed, upcast events.

Importable by Spark's Python workers, which unpickle the fold's functions by reference.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from eventcraft.eventstore import EVENT_VERSION, AsyncEventStore, EventStore, NewEvent
from eventcraft.projections import Fold, Projection, ReadModel, State, TypedEvent

from examples.bank import AccountClosed, AccountOpened, MoneyDeposited, MoneyWithdrawn, bank_events

metadata = sa.MetaData()

typed_balances_table = sa.Table(
    "typed_account_balances",
    metadata,
    sa.Column("account_id", sa.Text, primary_key=True),
    sa.Column("owner", sa.Text, nullable=False),
    sa.Column("balance_cents", sa.BigInteger, nullable=False),
    sa.Column("is_open", sa.Boolean, nullable=False),
)

deposits_table = sa.Table(
    "typed_deposits",
    metadata,
    sa.Column("position", sa.BigInteger, primary_key=True),
    sa.Column("stream_id", sa.Text, nullable=False),
    sa.Column("event_class", sa.Text, nullable=False),
    sa.Column("amount_cents", sa.BigInteger, nullable=False),
    sa.Column("reference", sa.Text, nullable=False),
    sa.Column("stored_version", sa.Integer, nullable=False),
)


def _account(event: TypedEvent[Any]) -> str:
    return event.stream_id.removeprefix("account-")


def _opened(account_id: Any) -> State:
    return {"account_id": account_id, "owner": "", "balance_cents": 0, "is_open": False}


def _evolve(state: State, event: TypedEvent[Any]) -> State:
    data = event.data
    if isinstance(data, AccountOpened):
        return {**state, "owner": data.owner, "is_open": True}
    if isinstance(data, MoneyDeposited):
        return {**state, "balance_cents": state["balance_cents"] + data.amount_cents}
    if isinstance(data, MoneyWithdrawn):
        return {**state, "balance_cents": state["balance_cents"] - data.amount_cents}
    if isinstance(data, AccountClosed):
        return {**state, "is_open": False}
    raise TypeError(f"not a bank event: {data!r}")


typed_balances = Fold(
    "typed-balances",
    table=typed_balances_table,
    categories="account",
    types=sorted(bank_events.types),
    key=_account,  # a Python key: Spark calls it on the typed event too
    initial=_opened,
    apply=_evolve,
    registry=bank_events,
)
"""The examples' `account_balances`, written against typed events instead of decoding."""

typed_deposits = Projection(
    "typed-deposits", tables=[deposits_table], categories="account", registry=bank_events
)


@typed_deposits.on("MoneyDeposited")
def _deposited(read_model: ReadModel, event: TypedEvent[MoneyDeposited]) -> None:
    read_model.execute(
        sa.insert(read_model[deposits_table]).values(
            position=event.position,
            stream_id=event.stream_id,
            event_class=type(event.data).__name__,
            amount_cents=event.data.amount_cents,
            reference=event.data.reference,
            stored_version=event.metadata.get(EVENT_VERSION, 1),
        )
    )


def bank_history() -> list[tuple[str, list[NewEvent]]]:
    """Two accounts' appends, with deposits stored at schema version 1 (euros as a float)
    and 2 (cents)."""
    return [
        (
            "account-1",
            [
                NewEvent("AccountOpened", {"owner": "ada", "overdraft_limit_cents": 0}),
                NewEvent("MoneyDeposited", {"amount": 12.5}, {EVENT_VERSION: 1}),
                NewEvent(
                    "MoneyDeposited", {"amount_cents": 300, "reference": "r"}, {EVENT_VERSION: 2}
                ),
                NewEvent("MoneyWithdrawn", {"amount_cents": 50}),
            ],
        ),
        (
            "account-2",
            [
                NewEvent("AccountOpened", {"owner": "bo", "overdraft_limit_cents": 0}),
                NewEvent("MoneyDeposited", {"amount": 0.07}, {EVENT_VERSION: 1}),
            ],
        ),
        ("account-2", [NewEvent("AccountClosed", {})]),
    ]


def append_bank_history(store: EventStore) -> int:
    """`bank_history` appended; the last position."""
    return [store.append(stream, events) for stream, events in bank_history()][-1].positions[-1]


async def append_bank_history_async(store: AsyncEventStore) -> int:
    """`bank_history` appended through the async API; the last position."""
    for stream, events in bank_history():
        last = (await store.append(stream, events)).positions[-1]
    return last


EXPECTED_DEPOSITS = [
    (2, "account-1", "MoneyDeposited", 1250, "", 1),
    (3, "account-1", "MoneyDeposited", 300, "r", 2),
    (6, "account-2", "MoneyDeposited", 7, "", 1),
]
"""`typed_deposits` after `append_bank_history`: version-1 deposits upcast to cents."""

EXPECTED_BALANCES = [("1", "ada", 1500, True), ("2", "bo", 7, False)]
"""`typed_balances` after `append_bank_history`."""
