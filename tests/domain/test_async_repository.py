"""The async repository on every backend: the sync repository's contract, awaited, and
tasks racing through `execute`. Its decisions are `RepositoryRules`', which the sync
repository's tests cover; these check that the awaited calls reach them."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest
from eventcraft.domain import AggregateNotFound, AsyncRepository, Repository
from eventcraft.eventstore import AsyncEventStore, EventStore, WrongExpectedVersion

from examples.bank import BankAccount, InsufficientFunds

T = TypeVar("T")


def run(test: Callable[[AsyncEventStore], Awaitable[T]], url: str) -> T:
    async def main() -> T:
        async with await AsyncEventStore.open(url) as store:
            return await asyncio.wait_for(test(store), 60)

    return asyncio.run(main())


async def opened(repo: AsyncRepository[BankAccount], account_id: str = "ann") -> None:
    await repo.execute(account_id, lambda a: a.open(account_id), create=True)


def test_a_saved_aggregate_loads_with_the_same_state_and_version(store_url: str) -> None:
    async def test(store: AsyncEventStore) -> None:
        repo = AsyncRepository(store, BankAccount)
        await opened(repo)
        account = await repo.load("ann")
        account.deposit(500)
        account.withdraw(200)
        result = await repo.save(account)
        assert result is not None and result.version == 3
        loaded = await repo.load("ann")
        assert (loaded.state, loaded.version) == (account.state, 3)
        assert await repo.exists("ann") and not await repo.exists("bob")
        with pytest.raises(AggregateNotFound):
            await repo.load("bob")
        assert await repo.save(loaded) is None

    run(test, store_url)


def test_a_stale_save_is_refused_and_writes_nothing(store_url: str) -> None:
    async def test(store: AsyncEventStore) -> None:
        repo = AsyncRepository(store, BankAccount)
        await opened(repo)
        first, second = await repo.load("ann"), await repo.load("ann")
        first.deposit(100)
        await repo.save(first)
        second.deposit(7)
        with pytest.raises(WrongExpectedVersion):
            await repo.save(second)
        assert (await repo.load("ann")).state.balance_cents == 100

    run(test, store_url)


def test_racing_tasks_through_execute_each_take_effect_once(store_url: str) -> None:
    async def test(store: AsyncEventStore) -> None:
        repo = AsyncRepository(store, BankAccount)
        await opened(repo)

        async def deposit(n: int) -> None:
            await asyncio.sleep(0)  # let the others load the same version
            await repo.execute("ann", lambda a: a.deposit(n + 1), attempts=100)

        await asyncio.gather(*(deposit(n) for n in range(20)))
        account = await repo.load("ann")
        assert account.state.balance_cents == sum(range(1, 21))
        assert account.version == 21

    run(test, store_url)


def test_execute_awaits_a_coroutine_command_and_gives_up_after_its_attempts(
    store_url: str,
) -> None:
    async def test(store: AsyncEventStore) -> None:
        repo = AsyncRepository(store, BankAccount)
        await opened(repo)
        calls = 0

        async def racing(account: BankAccount) -> str:
            nonlocal calls
            calls += 1
            account.deposit(1)
            # Another writer gets in between every load and save:
            other = await repo.load("ann")
            other.deposit(5)
            await repo.save(other)
            return "done"

        with pytest.raises(WrongExpectedVersion):
            await repo.execute("ann", racing, attempts=3)
        assert calls == 3
        with pytest.raises(InsufficientFunds):
            await repo.execute("ann", lambda a: a.withdraw(10**9))

    run(test, store_url)


def test_a_command_keyed_by_a_request_id_stores_once_however_often_it_is_sent(
    store_url: str,
) -> None:
    async def test(store: AsyncEventStore) -> None:
        repo = AsyncRepository(store, BankAccount)
        await opened(repo)
        key = uuid.uuid4()
        results = await asyncio.gather(
            *(
                repo.execute("ann", lambda a: a.deposit(10), idempotency_key=key, attempts=10)
                for _ in range(5)
            )
        )
        assert results == [None] * 5
        account = await repo.load("ann")
        assert (account.version, account.state.balance_cents) == (2, 10)
        stored = await store.read_event(key)
        assert stored is not None and stored.type == "MoneyDeposited"

    run(test, store_url)


def test_a_keyed_command_sent_again_is_run_on_what_it_first_saw(store_url: str) -> None:
    async def test(store: AsyncEventStore) -> None:
        repo = AsyncRepository(store, BankAccount, snapshot_every=1)
        await opened(repo)
        await repo.execute("ann", lambda a: a.deposit(10))
        key = uuid.uuid4()

        async def withdraw_all(account: BankAccount) -> int:
            account.withdraw(10)  # refused once the 10 are gone
            return account.state.balance_cents

        first = await repo.execute("ann", withdraw_all, idempotency_key=key)
        await repo.execute("ann", lambda a: a.deposit(3))
        again = await repo.execute("ann", withdraw_all, idempotency_key=key)
        assert (first, again) == (0, 0)
        assert (await repo.load("ann")).state.balance_cents == 3
        then = await repo.load("ann", version=2)  # before the snapshot at version 4
        assert (then.version, then.state.balance_cents) == (2, 10)

    run(test, store_url)


def test_the_sync_and_async_repositories_read_each_others_aggregates_and_snapshots(
    sqlite_url: str,
) -> None:
    with EventStore.open(sqlite_url) as sync_store:
        sync_repo = Repository(sync_store, BankAccount)
        account = BankAccount("ann")
        account.open("ann")
        for _ in range(60):  # past BankAccount.snapshot_every
            account.deposit(1)
        sync_repo.save(account)
        assert sync_store.load_snapshot("account-ann") is not None

    async def test(store: AsyncEventStore) -> None:
        repo = AsyncRepository(store, BankAccount)
        loaded = await repo.load("ann")
        assert (loaded.version, loaded.state) == (account.version, account.state)
        for _ in range(50):
            loaded.deposit(1)
        await repo.save(loaded)
        snapshot = await store.load_snapshot("account-ann")
        assert snapshot is not None and snapshot.version == 111

    run(test, sqlite_url)


def test_save_all_saves_several_aggregates_or_none(store_url: str) -> None:
    async def test(store: AsyncEventStore) -> None:
        repo = AsyncRepository(store, BankAccount)
        await opened(repo, "ann")
        await opened(repo, "bob")
        ann, bob = await repo.load("ann"), await repo.load("bob")
        ann.deposit(300)
        bob.deposit(100)
        results = await repo.save_all([ann, bob])
        assert [r.version if r else None for r in results] == [2, 2]
        stale = await repo.load("bob")
        bob.deposit(1)
        await repo.save(bob)
        stale.deposit(2)
        ann.deposit(3)
        with pytest.raises(WrongExpectedVersion) as caught:
            await repo.save_all([ann, stale])
        assert caught.value.stream_id == "account-bob"
        assert (await repo.load("ann")).state.balance_cents == 300

    run(test, store_url)
