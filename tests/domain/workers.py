"""Code that runs in separate processes during the domain concurrency tests."""

from __future__ import annotations

from typing import Any

from eventcraft.domain import Repository
from eventcraft.eventstore import EventStore

from examples.bank import BankAccount


def deposit_many(url: str, account_id: str, worker: int, count: int, barrier: Any) -> int:
    """Deposit 1 cent `count` times through `execute`; return how many races were lost."""
    lost = 0
    with EventStore.open(url) as store:
        repo = Repository(store, BankAccount, snapshot_every=7)
        barrier.wait()
        for n in range(count):
            attempts = 0

            def deposit(account: BankAccount, n: int = n) -> None:
                nonlocal attempts
                attempts += 1
                account.deposit(1, reference=f"{worker}/{n}")

            repo.execute(account_id, deposit, attempts=10_000)
            lost += attempts - 1
    return lost
