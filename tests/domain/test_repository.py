"""The repository on every backend: load, save, versions, metadata, snapshots, upcasting."""

from __future__ import annotations

import logging
import uuid

import pytest
from eventcraft.domain import (
    EVENT_VERSION,
    AggregateNotFound,
    RegistrationError,
    Repository,
    UnknownEventType,
    caused_by,
    command_context,
)
from eventcraft.eventstore import DuplicateEventId, EventStore, NewEvent, WrongExpectedVersion

from examples.bank import AccountAlreadyOpen, BankAccount, InsufficientFunds


def opened(repo: Repository[BankAccount], account_id: str = "ann", limit: int = 0) -> BankAccount:
    account = BankAccount(account_id)
    account.open(account_id, limit)
    repo.save(account)
    return account


def test_a_saved_aggregate_loads_with_the_same_state_and_version(store: EventStore) -> None:
    repo = Repository(store, BankAccount)
    account = opened(repo)
    account.deposit(500)
    account.withdraw(200)
    result = repo.save(account)
    assert result is not None and result.version == 3
    loaded = repo.load("ann")
    assert loaded.state == account.state
    assert (loaded.version, loaded.stored_version, loaded.pending_events) == (3, 3, ())
    types = [e.type for e in store.read_stream("account-ann")]
    assert types == ["AccountOpened", "MoneyDeposited", "MoneyWithdrawn"]


def test_loading_a_missing_aggregate_is_an_error_not_an_empty_object(store: EventStore) -> None:
    with pytest.raises(AggregateNotFound, match="no BankAccount 'bob': stream 'account-bob'") as e:
        Repository(store, BankAccount).load("bob")
    assert e.value.stream_id == "account-bob"


def test_saving_nothing_writes_nothing(store: EventStore) -> None:
    repo = Repository(store, BankAccount)
    opened(repo)
    assert repo.save(repo.load("ann")) is None
    assert store.stream_version("account-ann") == 1


def test_a_stale_save_is_refused_and_writes_nothing(store: EventStore) -> None:
    repo = Repository(store, BankAccount)
    opened(repo)
    first, second = repo.load("ann"), repo.load("ann")
    first.deposit(100)
    repo.save(first)
    second.deposit(7)
    with pytest.raises(WrongExpectedVersion) as caught:
        repo.save(second)
    assert (caught.value.expected, caught.value.actual) == (1, 2)
    assert repo.load("ann").state.balance_cents == 100
    assert second.pending_events  # still there: the caller decides


def test_creating_an_aggregate_that_exists_is_refused(store: EventStore) -> None:
    repo = Repository(store, BankAccount)
    opened(repo)
    with pytest.raises(WrongExpectedVersion):
        opened(repo)
    with pytest.raises(AccountAlreadyOpen):  # through execute, the rule says why
        repo.execute("ann", lambda a: a.open("ann"), create=True)


def test_saving_again_after_a_lost_answer_writes_once(store: EventStore) -> None:
    repo = Repository(store, BankAccount)
    account = opened(repo)
    account.deposit(100)
    pending = account._pending.copy()
    first = repo.save(account)
    account._pending[:] = pending  # as if the answer never arrived
    account._stored_version = 1
    assert repo.save(account) == first
    assert store.stream_version("account-ann") == 2


def test_execute_runs_the_command_again_on_a_fresh_load_when_a_save_raced(
    store: EventStore,
) -> None:
    repo = Repository(store, BankAccount)
    opened(repo)
    calls = []

    def deposit_while_another_writer_wins(account: BankAccount) -> int:
        calls.append(account.version)
        if len(calls) == 1:
            rival = repo.load("ann")
            rival.deposit(1)
            repo.save(rival)
        account.deposit(10)
        return account.version

    assert repo.execute("ann", deposit_while_another_writer_wins) == 3
    assert calls == [1, 2]
    assert repo.load("ann").state.balance_cents == 11


def test_execute_gives_up_after_its_attempts(store: EventStore) -> None:
    repo = Repository(store, BankAccount)
    opened(repo)

    def always_raced(account: BankAccount) -> None:
        rival = repo.load("ann")
        rival.deposit(1)
        repo.save(rival)
        account.deposit(10)

    with pytest.raises(WrongExpectedVersion):
        repo.execute("ann", always_raced, attempts=3)
    assert repo.load("ann").state.balance_cents == 3


def test_execute_passes_a_domain_error_through_and_saves_nothing(store: EventStore) -> None:
    repo = Repository(store, BankAccount)
    opened(repo)
    with pytest.raises(InsufficientFunds):
        repo.execute("ann", lambda a: a.withdraw(1))
    with pytest.raises(AggregateNotFound):
        repo.execute("bob", lambda a: a.deposit(1))
    assert store.stream_version("account-ann") == 1
    assert store.stream_version("account-bob") == 0


def test_a_keyed_command_sent_again_answers_as_the_first_time_though_it_would_now_refuse(
    store: EventStore,
) -> None:
    repo = Repository(store, BankAccount)
    account = opened(repo)
    account.deposit(10)
    repo.save(account)
    key, opening = uuid.uuid4(), uuid.uuid4()

    def withdraw_all(account: BankAccount) -> int:
        account.withdraw(10)  # refused once the 10 are gone
        return account.state.balance_cents

    def open_bob(account: BankAccount) -> str:
        account.open("bob")  # refused once the account is open
        return account.state.owner

    repo.execute("ann", lambda a: a.deposit(5))
    answers = [repo.execute("ann", withdraw_all, idempotency_key=key) for _ in range(3)]
    repo.execute("ann", lambda a: a.deposit(7))  # later events change nothing
    answers.append(repo.execute("ann", withdraw_all, idempotency_key=key))
    assert answers == [5, 5, 5, 5]
    created = [repo.execute("bob", open_bob, create=True, idempotency_key=opening)] * 2
    assert created == ["bob", "bob"]
    assert [e.type for e in store.read_stream("account-ann")][2:] == [
        "MoneyDeposited",
        "MoneyWithdrawn",
        "MoneyDeposited",
    ]
    assert store.stream_version("account-bob") == 1
    # A key first used for another aggregate is not taken as this one's.
    with pytest.raises(DuplicateEventId):
        repo.execute("ann", withdraw_all, idempotency_key=opening)


def test_an_aggregate_loads_as_it_was_at_a_version(store: EventStore) -> None:
    repo = Repository(store, BankAccount, snapshot_every=2)
    opened(repo)
    for amount in (1, 10, 100):
        account = repo.load("ann")
        account.deposit(amount)
        repo.save(account)
    assert store.load_snapshot("account-ann") is not None  # at version 4, past 3
    then = repo.load("ann", version=3)
    assert (then.version, then.state.balance_cents) == (3, 11)
    assert repo.load("ann", version=99).state.balance_cents == 111
    for wrong in (0, -1, True, "3"):
        with pytest.raises(ValueError, match="version must be a positive int"):
            repo.load("ann", version=wrong)  # type: ignore[arg-type]


def test_events_carry_the_command_context_and_their_schema_version(store: EventStore) -> None:
    repo = Repository(store, BankAccount)
    with command_context(correlation_id="req-1", user="ann"):
        opened(repo)
    (event,) = store.read_stream("account-ann")
    assert event.metadata == {
        "correlation_id": "req-1",
        "causation_id": "req-1",
        "user": "ann",
        EVENT_VERSION: 1,
    }
    with caused_by(event, user="interest-job"):
        repo.execute("ann", lambda a: a.deposit(5))
    deposit = list(store.read_stream("account-ann"))[-1]
    assert deposit.metadata["correlation_id"] == "req-1"
    assert deposit.metadata["causation_id"] == str(event.id)
    assert deposit.metadata["user"] == "interest-job"
    assert deposit.metadata[EVENT_VERSION] == 2


def test_without_a_context_each_save_starts_a_conversation(store: EventStore) -> None:
    repo = Repository(store, BankAccount)
    opened(repo)
    repo.execute("ann", lambda a: a.deposit(5))
    first, second = (e.metadata for e in store.read_stream("account-ann"))
    assert first["correlation_id"] == first["causation_id"]
    assert first["correlation_id"] != second["correlation_id"]


def test_a_snapshot_is_saved_each_time_the_version_passes_a_multiple(store: EventStore) -> None:
    repo = Repository(store, BankAccount, snapshot_every=3)
    opened(repo)
    repo.execute("ann", lambda a: a.deposit(1))
    assert store.load_snapshot("account-ann") is None
    account = repo.load("ann")
    for _ in range(3):
        account.deposit(1)
    repo.save(account)  # version 2 -> 5: past 3
    snapshot = store.load_snapshot("account-ann")
    assert snapshot is not None and snapshot.version == 5
    assert snapshot.data["balance_cents"] == 4


def test_a_load_starts_from_the_snapshot(store: EventStore) -> None:
    repo = Repository(store, BankAccount, snapshot_every=2)
    opened(repo)
    repo.execute("ann", lambda a: a.deposit(10))
    # A doctored snapshot proves the load used it instead of the first events.
    store.save_snapshot(
        "account-ann",
        version=2,
        type="account",
        data={"owner": "ann", "is_open": True, "balance_cents": 999},
    )
    repo.execute("ann", lambda a: a.deposit(1))
    assert repo.load("ann").state.balance_cents == 1000
    assert Repository(store, BankAccount, snapshot_every=None).load("ann").state.balance_cents == 11


def test_a_snapshot_of_another_schema_version_is_ignored(store: EventStore) -> None:
    repo = Repository(store, BankAccount, snapshot_every=1)
    opened(repo)
    store.save_snapshot(
        "account-ann", version=1, type="account", schema_version=99, data={"balance_cents": 5}
    )
    assert repo.load("ann").state.balance_cents == 0


def test_a_snapshot_that_no_longer_fits_the_state_is_ignored(
    store: EventStore, caplog: pytest.LogCaptureFixture
) -> None:
    repo = Repository(store, BankAccount, snapshot_every=1)
    opened(repo)
    store.save_snapshot("account-ann", version=1, type="account", data={"balance_cents": "x"})
    with caplog.at_level(logging.WARNING, logger="eventcraft.domain"):
        assert repo.load("ann").state.balance_cents == 0
    assert "ignoring the snapshot of account-ann" in caplog.text


def test_a_snapshot_that_no_longer_fits_is_logged_by_its_fields_not_by_their_values(
    store: EventStore, caplog: pytest.LogCaptureFixture
) -> None:
    # pydantic's message quotes the input: a state's field, perhaps a personal one, opened.
    repo = Repository(store, BankAccount, snapshot_every=1)
    opened(repo)
    misfit = {"owner": "ann", "is_open": True, "balance_cents": "Ann Quillon's savings"}
    store.save_snapshot("account-ann", version=1, type="account", data=misfit)
    with caplog.at_level(logging.WARNING, logger="eventcraft.domain"):
        assert repo.load("ann").state.balance_cents == 0
    assert "Ann Quillon" not in caplog.text
    assert "balance_cents: int_parsing" in caplog.text


def test_old_events_are_upcast_as_they_load(store: EventStore) -> None:
    repo = Repository(store, BankAccount)
    opened(repo)
    store.append("account-ann", [NewEvent("MoneyDeposited", {"amount": 12.34})])  # version 1
    store.append("account-ann", [NewEvent("MoneyDeposited", {"amount": 0.5}, {EVENT_VERSION: 1})])
    account = repo.load("ann")
    assert account.state.balance_cents == 1284
    assert [e.data for e in store.read_stream("account-ann", from_version=2)] == [
        {"amount": 12.34},
        {"amount": 0.5},
    ]  # stored events never change


def test_an_unknown_stored_event_names_where_it_is(store: EventStore) -> None:
    repo = Repository(store, BankAccount)
    opened(repo)
    store.append("account-ann", [NewEvent("InterestPaid", {"cents": 1})])
    with pytest.raises(
        UnknownEventType, match="'InterestPaid' at version 2 of stream 'account-ann'"
    ):
        repo.load("ann")


def test_a_repository_refuses_another_aggregate_type(store: EventStore) -> None:
    from examples.orders import Order

    order = Order("o1")
    order.place("c1")
    with pytest.raises(TypeError, match="saves BankAccount, not Order"):
        Repository(store, BankAccount).save(order)  # type: ignore[arg-type]


@pytest.mark.parametrize("every", [0, -1, True, "100"])
def test_an_unusable_snapshot_interval_is_refused(store: EventStore, every: object) -> None:
    with pytest.raises(RegistrationError, match="snapshot_every"):
        Repository(store, BankAccount, snapshot_every=every)  # type: ignore[arg-type]


def test_save_all_saves_several_aggregates_or_none(store: EventStore) -> None:
    """A transfer: one account debited, another credited, both or neither."""
    repo = Repository(store, BankAccount)
    ann, bob = opened(repo, "ann", limit=0), opened(repo, "bob")
    ann.deposit(500)
    repo.save(ann)
    ann.withdraw(200)
    bob.deposit(200)
    idle = repo.load("ann")  # nothing pending: skipped
    results = repo.save_all([ann, bob])
    assert [r.version if r else None for r in results] == [3, 2]
    assert (ann.stored_version, bob.stored_version) == (3, 2)
    assert repo.load("bob").state.balance_cents == 200
    assert repo.save_all([idle]) == [None]

    stale = repo.load("ann")
    ann.withdraw(100)
    repo.save(ann)  # another command got there first
    stale.withdraw(50)
    bob.deposit(50)
    head = store.high_water_mark()
    with pytest.raises(WrongExpectedVersion) as caught:
        repo.save_all([bob, stale])
    assert caught.value.stream_id == "account-ann"
    assert list(store.read_all(after=head)) == []
    assert bob.pending_events and stale.pending_events  # the caller decides
    with pytest.raises(ValueError, match="twice"):
        repo.save_all([bob, bob])
