"""Commands from several processes on one aggregate: none lost, none applied twice."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ProcessPoolExecutor

from eventcraft.domain import Repository
from eventcraft.eventstore import EventStore

from examples.bank import BankAccount

from ..processes import PROCESSES
from .workers import deposit_many


def test_concurrent_commands_through_execute_each_take_effect_once(
    shared_store_url: str,
) -> None:
    processes, deposits = 4, 40
    with EventStore.open(shared_store_url) as store:
        account = BankAccount("shared")
        account.open("shared")
        Repository(store, BankAccount).save(account)
    with (
        PROCESSES.Manager() as manager,
        ProcessPoolExecutor(processes, mp_context=PROCESSES) as pool,
    ):
        barrier = manager.Barrier(processes)
        futures = [
            pool.submit(deposit_many, shared_store_url, "shared", worker, deposits, barrier)
            for worker in range(processes)
        ]
        lost_races = sum(future.result() for future in futures)
    assert lost_races > 0, "the writers never raced: the test proves nothing"
    with EventStore.open(shared_store_url) as store:
        references = Counter(
            e.data["reference"] for e in store.read_stream("account-shared") if e.version > 1
        )
        assert len(references) == processes * deposits
        assert set(references.values()) == {1}
        with_snapshot = Repository(store, BankAccount, snapshot_every=7).load("shared")
        from_events = Repository(store, BankAccount, snapshot_every=None).load("shared")
        snapshot = store.load_snapshot("account-shared")
    assert from_events.state.balance_cents == processes * deposits
    assert with_snapshot.state == from_events.state
    assert with_snapshot.version == from_events.version == 1 + processes * deposits
    assert snapshot is not None and snapshot.version > 1
