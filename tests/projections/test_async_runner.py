"""The async runner on every backend: the sync runner's projectors driven from a loop,
reading through an AsyncEventStore, with coroutine subscription handlers awaited on it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest
from eventcraft.eventstore import AsyncEventStore, NewEvent, RecordedEvent
from eventcraft.projections import AsyncProjectionRunner, ProjectionTimeout, Subscription

from .models import balances, balances_table, rows

T = TypeVar("T")


def run(test: Callable[[AsyncEventStore], Awaitable[T]], url: str) -> T:
    async def main() -> T:
        async with await AsyncEventStore.open(url) as store:
            return await asyncio.wait_for(test(store), 60)

    return asyncio.run(main())


async def deposit(store: AsyncEventStore, account: str, amount: int) -> int:
    result = await store.append(f"account-{account}", [NewEvent("Deposited", {"amount": amount})])
    return result.positions[-1]


def test_a_running_runner_keeps_a_read_model_and_awaits_coroutine_handlers(
    store_url: str,
) -> None:
    async def test(store: AsyncEventStore) -> None:
        loop_thread = threading.get_ident()
        receipts: list[tuple[int, bool]] = []

        async def receipt(event: RecordedEvent) -> None:
            await asyncio.sleep(0)
            receipts.append((event.position, threading.get_ident() == loop_thread))

        subscription = Subscription("receipts", receipt, types="Deposited")
        runner = await AsyncProjectionRunner.open(store, [balances, subscription], batch_size=3)
        async with runner:
            following = asyncio.create_task(runner.run())
            last = 0
            for n in range(10):
                last = await deposit(store, f"a{n % 3}", n + 1)
            await runner.wait_until(last)
            with runner.runner.database.reading() as connection:
                kept = {row[0]: row[1] for row in rows(connection, balances_table)}
            assert kept == {
                "account-a0": 1 + 4 + 7 + 10,
                "account-a1": 2 + 5 + 8,
                "account-a2": 3 + 6 + 9,
            }
            assert sorted(p for p, _ in receipts) == [p for p, _ in receipts]
            assert len(receipts) == 10 and all(on_loop for _, on_loop in receipts)
            following.cancel()
            with pytest.raises(asyncio.CancelledError):
                await following
            # Stopped: a new event is not applied.
            later = await deposit(store, "a0", 100)
            with pytest.raises(ProjectionTimeout):
                await runner.wait_until(later, timeout=0.3)
            statuses = {s.name: s.position for s in await runner.status()}
            assert statuses == {"balances": last, "receipts": last}

    run(test, store_url)


def test_catching_up_applies_what_is_there_once(store_url: str) -> None:
    async def test(store: AsyncEventStore) -> None:
        for _ in range(5):
            await deposit(store, "ann", 10)
        async with await AsyncProjectionRunner.open(store, [balances]) as runner:
            await runner.catch_up()
            await runner.catch_up()
            with runner.runner.database.reading() as connection:
                assert rows(connection, balances_table) == [("account-ann", 50, 5)]

    run(test, store_url)
