"""A Spark replay of a fold given the application's registry folds typed, upcast events."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from eventcraft.eventstore import EventStore
from eventcraft.projections import ProjectionRunner

from examples.read_models import account_balances, balances
from tests.projections.typed_models import typed_balances, typed_balances_table

from .histories import append

# Deposits at schema version 1 (euros as a float) among version 2 ones, and other events.
HISTORY = [
    [(n % 5, kind, 100 + 37 * n)]
    for n, kind in enumerate(["open", "deposit_v1", "deposit", "withdraw", "order", "close"] * 6)
]


def _rows(runner: ProjectionRunner, table: sa.Table) -> list[tuple[Any, ...]]:
    with runner.database.reading() as connection:
        return sorted(tuple(row) for row in connection.execute(sa.select(table)))


def test_a_replay_folds_upcast_typed_events_as_the_runners_in_process_do(
    spark: Any, shared_store_url: str
) -> None:
    from eventcraft.projections.spark import replay

    url = shared_store_url
    with EventStore.open(url) as store:
        append(store, HISTORY)
    report = replay(typed_balances, url, spark=spark)
    assert report.events == 30  # the account events: every kind but the orders
    with (
        EventStore.open(url) as store,
        ProjectionRunner(store, [typed_balances, account_balances]) as runner,
    ):
        runner.catch_up()
        replayed = _rows(runner, typed_balances_table)
        by_hand = [(k.removeprefix("account-"), *rest) for k, *rest in _rows(runner, balances)]
        assert replayed == sorted(by_hand)  # decoded by hand, as the aggregate decodes
        runner.rebuild(typed_balances.name)
        assert _rows(runner, typed_balances_table) == replayed
