"""A projection given the application's registry reads typed, upcast events, as an aggregate
does, in every runner; without one it reads events as stored."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import sqlalchemy as sa
from eventcraft.eventstore import AsyncEventStore, EventStore, NewEvent, RecordedEvent
from eventcraft.projections import (
    AsyncProjectionRunner,
    DefinitionError,
    ErrorPolicy,
    PartitionedRunner,
    Projection,
    ProjectionRunner,
    ReadModel,
    ReducerFold,
    StreamKey,
    Subscription,
    TypedEvent,
)
from eventcraft.projections.reducers import Sum

from examples.bank import BankAccount, MoneyDeposited, bank_events
from examples.read_models import account_balances, balances

from .models import rows
from .typed_models import (
    EXPECTED_BALANCES,
    EXPECTED_DEPOSITS,
    append_bank_history,
    append_bank_history_async,
    deposits_table,
    typed_balances,
    typed_balances_table,
    typed_deposits,
)


def test_a_projection_given_the_registry_reads_version_1_events_upcast_and_typed(
    store: EventStore,
) -> None:
    last = append_bank_history(store)
    with ProjectionRunner(store, [typed_deposits, typed_balances], batch_size=2) as runner:
        runner.catch_up()
        runner.wait_until(last, timeout=10)
        with runner.database.reading() as connection:
            assert rows(connection, deposits_table) == EXPECTED_DEPOSITS
            assert rows(connection, typed_balances_table) == EXPECTED_BALANCES


def test_a_handler_gets_the_event_an_aggregate_load_decodes_with_the_envelope_as_stored(
    store: EventStore,
) -> None:
    append_bank_history(store)
    seen: list[TypedEvent[Any]] = []
    table = sa.Table("seen", sa.MetaData(), sa.Column("n", sa.Integer, primary_key=True))
    projection = Projection("seen", tables=[table], registry=bank_events)
    projection.on("MoneyDeposited")(lambda read_model, event: seen.append(event))
    with ProjectionRunner(store, [projection]) as runner:
        runner.catch_up()
    stored = [e for e in store.read_all() if e.type == "MoneyDeposited"]
    assert [event.recorded for event in seen] == stored
    assert [event.data for event in seen] == [bank_events.decode(e) for e in stored]
    assert seen[0].data == MoneyDeposited(amount_cents=1250, reference="")
    loaded = BankAccount.registry.decode_encoded(
        next(iter(store.read_stream_encoded("account-1", from_version=2))), "account-1"
    )
    assert seen[0].data == loaded  # what a Repository load folds into the aggregate
    first, recorded = seen[0], stored[0]
    assert (first.id, first.stream_id, first.version, first.position, first.type) == (
        recorded.id,
        recorded.stream_id,
        recorded.version,
        recorded.position,
        recorded.type,
    )
    assert (first.metadata, first.recorded_at, first.tags, first.category) == (
        recorded.metadata,
        recorded.recorded_at,
        recorded.tags,
        "account",
    )


def test_a_typed_fold_keeps_the_read_model_a_fold_decoding_by_hand_keeps(
    store: EventStore,
) -> None:
    append_bank_history(store)
    with ProjectionRunner(store, [typed_balances, account_balances]) as runner:
        runner.catch_up()
        with runner.database.reading() as connection:
            by_hand = [
                (k.removeprefix("account-"), *rest) for k, *rest in rows(connection, balances)
            ]
            assert rows(connection, typed_balances_table) == sorted(by_hand)


def test_a_rebuild_reads_typed_events_and_gives_what_catching_up_gave(store: EventStore) -> None:
    append_bank_history(store)
    with ProjectionRunner(store, [typed_deposits, typed_balances]) as runner:
        runner.catch_up()
        reports = [runner.rebuild("typed-deposits"), runner.rebuild("typed-balances")]
        assert [report.generation for report in reports] == [2, 2]
        with runner.database.reading() as connection:
            assert rows(connection, deposits_table) == EXPECTED_DEPOSITS
            assert rows(connection, typed_balances_table) == EXPECTED_BALANCES


@pytest.mark.slow
def test_the_async_runner_hands_typed_events_to_projections_and_coroutine_handlers(
    store_url: str,
) -> None:
    received: list[tuple[int, int]] = []

    async def received_deposit(event: TypedEvent[MoneyDeposited]) -> None:
        await asyncio.sleep(0)
        received.append((event.position, event.data.amount_cents))

    receipts = Subscription(
        "receipts",
        received_deposit,
        types="MoneyDeposited",
        where=lambda deposit: deposit.amount_cents > 100,
        registry=bank_events,
    )

    async def main() -> list[tuple[Any, ...]]:
        async with await AsyncEventStore.open(store_url) as store:
            last = await append_bank_history_async(store)
            runner = await AsyncProjectionRunner.open(
                store, [typed_deposits, typed_balances, receipts], batch_size=2
            )
            async with runner:
                following = asyncio.create_task(runner.run())
                await runner.wait_until(last)
                following.cancel()
                with runner.runner.database.reading() as connection:
                    return rows(connection, deposits_table) + rows(connection, typed_balances_table)

    assert asyncio.run(asyncio.wait_for(main(), 60)) == EXPECTED_DEPOSITS + EXPECTED_BALANCES
    assert received == [(2, 1250), (3, 300)]


def test_each_partition_of_a_subscription_given_the_registry_gets_typed_events(
    sqlite_url: str,
) -> None:
    seen: list[tuple[str, int]] = []

    def deposited(event: TypedEvent[MoneyDeposited]) -> None:
        seen.append((event.stream_id, event.data.amount_cents))

    deposits = Subscription("deposits", deposited, types="MoneyDeposited", registry=bank_events)
    with EventStore.open(sqlite_url) as store:
        append_bank_history(store)
        with PartitionedRunner.for_subscription(
            store, deposits, partitions=2, batch_size=10
        ) as runner:
            while runner.step():
                pass
    assert sorted(seen) == [("account-1", 300), ("account-1", 1250), ("account-2", 7)]


def test_a_subscription_without_a_registry_still_gets_events_as_stored(
    store: EventStore,
) -> None:
    append_bank_history(store)
    seen: list[RecordedEvent] = []
    raw = Subscription("raw", seen.append, types="MoneyDeposited", where=lambda data: True)
    with ProjectionRunner(store, [raw]) as runner:
        runner.catch_up()
    assert [type(event) for event in seen] == [RecordedEvent] * 3
    assert seen[0].data == {"amount": 12.5}


def test_an_event_the_registry_does_not_know_fails_as_it_fails_a_repository_load(
    store: EventStore,
) -> None:
    append_bank_history(store)
    unknown = store.append("account-1", [NewEvent("InterestPaid", {"cents": 1})]).positions[0]
    table = sa.Table("interest", sa.MetaData(), sa.Column("n", sa.Integer, primary_key=True))
    interest = Projection(
        "interest",
        tables=[table],
        registry=bank_events,
        on_error=ErrorPolicy(attempts=1, backoff=0, then="skip"),
    )

    @interest.on("InterestPaid")
    def _paid(read_model: ReadModel, event: TypedEvent[Any]) -> None:
        raise AssertionError("never called: the event has no class")

    with ProjectionRunner(store, [interest]) as runner:
        runner.catch_up()
        (parked,) = runner.parked("interest")
    assert parked.position == unknown
    assert parked.error.startswith("UnknownEventType: ")
    assert "InterestPaid" in parked.error and "no event class registered" in parked.error


def test_a_definition_refuses_a_registry_that_cannot_decode() -> None:
    with pytest.raises(DefinitionError, match=r"typed: registry .*decode\(recorded\)"):
        Subscription("typed", print, registry=object())  # type: ignore[arg-type]


def test_a_reducer_fold_refuses_a_registry_since_spark_sql_cannot_upcast() -> None:
    table = sa.Table(
        "deposited",
        sa.MetaData(),
        sa.Column("account_id", sa.Text, primary_key=True),
        sa.Column("cents", sa.BigInteger),
    )
    with pytest.raises(DefinitionError, match="a ReducerFold reads events as stored"):
        ReducerFold(
            "deposited",
            table=table,
            key=StreamKey("account-"),
            columns={"cents": Sum("amount_cents")},
            registry=bank_events,
        )
