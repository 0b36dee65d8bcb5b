"""Any sequence of commands gives the same state saved and reloaded as applied in memory.

The repository side saves and reloads at random points, with snapshots at
a random interval (or none), while a legacy writer slips in version-1
deposits that must be upcast on every load.
"""

from __future__ import annotations

import uuid

from eventcraft.domain import EVENT_VERSION, DomainError, Repository
from eventcraft.eventstore import EventStore, NewEvent
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from examples.bank import BankAccount, MoneyDeposited

Step = tuple[str, int]

steps = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["deposit", "withdraw", "legacy-deposit"]), st.integers(1, 900)),
        st.tuples(st.sampled_from(["save", "reload", "close"]), st.just(0)),
    ),
    max_size=30,
)


def outcome(account: BankAccount, action: str, amount: int) -> str:
    """What a command did: 'ok' or the name of the rule it broke."""
    try:
        _run(account, action, amount)
    except DomainError as error:
        return type(error).__name__
    return "ok"


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    limit=st.integers(0, 500),
    snapshot_every=st.sampled_from([None, 1, 2, 5]),
    history=steps,
)
def test_saved_and_reloaded_equals_applied_in_memory(
    store: EventStore, limit: int, snapshot_every: int | None, history: list[Step]
) -> None:
    account_id = uuid.uuid4().hex  # each example its own stream in the shared store
    repo = Repository(store, BankAccount, snapshot_every=snapshot_every)
    model = BankAccount(account_id)
    model.open("ann", limit)
    stored = BankAccount(account_id)
    stored.open("ann", limit)
    repo.save(stored)

    for action, amount in history:
        if action == "save":
            repo.save(stored)
        elif action == "reload":
            repo.save(stored)
            stored = repo.load(account_id)
        elif action == "legacy-deposit":
            # An old client writes euros as a float, schema version 1.
            repo.save(stored)
            legacy = NewEvent("MoneyDeposited", {"amount": amount / 100}, {EVENT_VERSION: 1})
            store.append(stored.stream_id, [legacy], expected_version=stored.version)
            stored = repo.load(account_id)
            model.record(MoneyDeposited(amount_cents=amount))
        else:
            assert outcome(stored, action, amount) == outcome(model, action, amount)
        assert stored.state == model.state

    repo.save(stored)
    reloaded = repo.load(account_id)
    assert reloaded.state == model.state
    assert reloaded.version == model.version
    assert Repository(store, BankAccount, snapshot_every=None).load(account_id).state == model.state


def _run(account: BankAccount, action: str, amount: int) -> None:
    if action == "deposit":
        account.deposit(amount)
    elif action == "withdraw":
        account.withdraw(amount)
    else:
        account.close(payout_to_zero=True)
