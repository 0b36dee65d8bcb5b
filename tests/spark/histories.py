"""Bank histories for the Spark tests: appended raw, some deposits at schema version 1."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import sqlalchemy as sa
from eventcraft.eventstore import ANY, EventStore, NewEvent, RecordedEvent
from eventcraft.projections import Fold, ProjectionRunner, StreamKey
from hypothesis import strategies as st

from examples.read_models import account_balances, balances

EVENT_VERSION = "event_version"

# (account number, what happens, amount in cents)
operation = st.tuples(
    st.integers(0, 11),
    st.sampled_from(["open", "deposit", "deposit_v1", "withdraw", "close", "order"]),
    st.integers(1, 100_000),
)
histories = st.lists(st.lists(operation, min_size=1, max_size=4), min_size=1, max_size=40)
"""Appends of one to four events each, to account (and order) streams, interleaved."""


def new_event(kind: str, number: int, amount: int) -> NewEvent:
    if kind == "open":
        return NewEvent("AccountOpened", {"owner": f"owner-{number}", "overdraft_limit_cents": 0})
    if kind == "deposit":
        return NewEvent(
            "MoneyDeposited", {"amount_cents": amount, "reference": ""}, {EVENT_VERSION: 2}
        )
    if kind == "deposit_v1":
        # What a release before MoneyDeposited v2 wrote: dollars as a float.
        return NewEvent("MoneyDeposited", {"amount": amount / 100}, {EVENT_VERSION: 1})
    if kind == "withdraw":
        return NewEvent("MoneyWithdrawn", {"amount_cents": amount})
    if kind == "close":
        return NewEvent("AccountClosed", {})
    return NewEvent("OrderPlaced", {"customer_id": f"c-{number}"})


def append(store: EventStore, history: list[list[tuple[int, str, int]]]) -> None:
    """Each step's account events in one append to its account, its orders in another."""
    for step in history:
        number = step[0][0]
        for stream, ops in (
            (f"account-{number}", [op for op in step if op[1] != "order"]),
            (f"order-{number}", [op for op in step if op[1] == "order"]),
        ):
            if ops:
                events = [new_event(kind, number, amount) for _, kind, amount in ops]
                store.append(stream, events, expected_version=ANY)


def balance_rows(runner: ProjectionRunner) -> list[tuple[Any, ...]]:
    """The account balances read model as its view serves it, sorted."""
    with runner.database.reading() as connection:
        found = connection.execute(sa.select(balances).order_by(balances.c.account_id))
        return [tuple(row) for row in found]


@contextlib.contextmanager
def fresh_store_url(kind: str, pg_base: str, directory: Path) -> Iterator[str]:
    """A new, empty store of `kind` for one hypothesis example."""
    name = uuid.uuid4().hex[:12]
    if kind == "sqlite":
        yield f"sqlite:///{directory / f'{name}.db'}"
        return
    schema = f"t_{name}"
    try:
        yield f"{pg_base}?schema={schema}"
    finally:
        with psycopg.connect(pg_base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def account_of(event: RecordedEvent) -> str:
    return event.stream_id.removeprefix("account-")


python_keyed_balances = Fold(
    account_balances.name,
    table=balances,
    categories=account_balances.categories,
    types=account_balances.types,
    key=account_of,  # what StreamKey("account-") states, as a function Spark must call
    initial=account_balances.initial,
    apply=account_balances.evolve,
)
assert isinstance(account_balances.key, StreamKey)
