"""Given/when/then: test an aggregate's decisions without a database.

::

    def test_an_overdraft_beyond_the_limit_is_refused() -> None:
        (
            scenario(BankAccount)
            .given(AccountOpened(owner="ann", overdraft_limit=100))
            .when(lambda account: account.withdraw(150))
            .then_raises(InsufficientFunds)
        )

`then(...)` also checks that each recorded event survives its trip through
the store's encoding: a payload that cannot be stored fails here, not in
production.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

import orjson
from eventcraft.eventstore import RecordedEvent

from .aggregate import Aggregate
from .event import DomainEvent
from .evolve import evolve

A = TypeVar("A", bound=Aggregate[Any])


class Scenario(Generic[A]):
    """One aggregate, some past events, one command, and what must follow.

    `then` returns the aggregate, for checks beyond the events; `then_raises`
    returns the error.

    Example::

        from eventcraft.domain import (
            Aggregate, DomainError, DomainEvent, EventRegistry, Scenario, State, evolves,
        )

        bank_events = EventRegistry()

        @bank_events.event("MoneyDeposited")
        class MoneyDeposited(DomainEvent):
            amount: int

        @bank_events.event("MoneyWithdrawn")
        class MoneyWithdrawn(DomainEvent):
            amount: int

        class AccountState(State):
            balance: int = 0

            @evolves
            def deposited(self, event: MoneyDeposited) -> "AccountState":
                return self.replace(balance=self.balance + event.amount)

            @evolves
            def withdrawn(self, event: MoneyWithdrawn) -> "AccountState":
                return self.replace(balance=self.balance - event.amount)

        class InsufficientFunds(DomainError):
            "A withdrawal beyond the balance."

        class BankAccount(Aggregate[AccountState]):
            category = "account"
            registry = bank_events

            def withdraw(self, amount: int) -> None:
                if amount > self.state.balance:
                    raise InsufficientFunds(f"{self.state.balance} left, not {amount}")
                self.record(MoneyWithdrawn(amount=amount))

        account = (
            Scenario(BankAccount, "7")
            .given(MoneyDeposited(amount=500))
            .when(lambda account: account.withdraw(200))
            .then(MoneyWithdrawn(amount=200))
        )
        assert (account.state.balance, account.version) == (300, 2)
    """

    def __init__(self, aggregate_type: type[A], aggregate_id: str = "test") -> None:
        self.aggregate = aggregate_type(aggregate_id)
        self._error: BaseException | None = None
        self._ran = False

    def given(self, *events: DomainEvent) -> Scenario[A]:
        """The aggregate's past: these events, as if loaded from its stream."""
        aggregate = self.aggregate
        state = aggregate.state
        for event in events:
            aggregate.registry.type_of(event)
            state = evolve(state, event)
        aggregate._restore(state, aggregate.stored_version + len(events))
        return self

    def when(self, command: Callable[[A], object]) -> Scenario[A]:
        """Run `command` on the aggregate; an exception it raises is kept for `then_raises`."""
        try:
            command(self.aggregate)
        except Exception as error:  # judged by then/then_raises
            self._error = error
        self._ran = True
        return self

    def then(self, *expected: DomainEvent) -> A:
        """The command succeeded and recorded exactly `expected`, in order."""
        self._require_when()
        if self._error is not None:
            raise AssertionError(
                f"expected {_names(expected)}, but the command raised {self._error!r}"
            ) from self._error
        recorded = self.aggregate.pending_events
        if recorded != expected:
            raise AssertionError(
                f"expected events {list(expected)!r},\n      recorded {list(recorded)!r}"
            )
        for event in recorded:
            self._round_trip(event)
        return self.aggregate

    def then_raises(
        self, error_type: type[BaseException], match: str | None = None
    ) -> BaseException:
        """The command raised `error_type` (its message matching `match`) and recorded nothing."""
        self._require_when()
        error = self._error
        if not isinstance(error, error_type):
            raise AssertionError(
                f"expected {error_type.__qualname__}, but the command "
                + (
                    f"raised {error!r}"
                    if error
                    else f"recorded {_names(self.aggregate.pending_events)}"
                )
            ) from error
        if match is not None and not re.search(match, str(error)):
            raise AssertionError(f"{error!r} does not match {match!r}")
        if self.aggregate.pending_events:
            raise AssertionError(
                f"the command raised {error!r} but left events recorded: "
                f"{_names(self.aggregate.pending_events)}; decorate it with @command"
            )
        return error

    def _require_when(self) -> None:
        if not self._ran:
            raise AssertionError("call when(...) before then(...)")

    def _round_trip(self, event: DomainEvent) -> None:
        registry = self.aggregate.registry
        new = registry.to_new_event(event, {})
        stored = RecordedEvent(
            id=uuid.uuid4(),
            stream_id=self.aggregate.stream_id,
            version=1,
            position=1,
            type=new.type,
            data=orjson.loads(orjson.dumps(event.model_dump(mode="json"))),
            metadata=dict(new.metadata),
            recorded_at=datetime.now(UTC),
        )
        decoded = registry.decode(stored)
        if decoded != event:
            raise AssertionError(f"{event!r} reads back from the store as {decoded!r}")


def scenario(aggregate_type: type[A], aggregate_id: str = "test") -> Scenario[A]:
    """Start a given/when/then test of `aggregate_type`.

    Example::

        from eventcraft.domain import (
            Aggregate, DomainError, DomainEvent, EventRegistry, State, evolves, scenario,
        )

        bank_events = EventRegistry()

        @bank_events.event("MoneyDeposited")
        class MoneyDeposited(DomainEvent):
            amount: int

        @bank_events.event("MoneyWithdrawn")
        class MoneyWithdrawn(DomainEvent):
            amount: int

        class AccountState(State):
            balance: int = 0

            @evolves
            def deposited(self, event: MoneyDeposited) -> "AccountState":
                return self.replace(balance=self.balance + event.amount)

            @evolves
            def withdrawn(self, event: MoneyWithdrawn) -> "AccountState":
                return self.replace(balance=self.balance - event.amount)

        class InsufficientFunds(DomainError):
            "A withdrawal beyond the balance."

        class BankAccount(Aggregate[AccountState]):
            category = "account"
            registry = bank_events

            def withdraw(self, amount: int) -> None:
                if amount > self.state.balance:
                    raise InsufficientFunds(f"{self.state.balance} left, not {amount}")
                self.record(MoneyWithdrawn(amount=amount))

        def test_a_withdrawal_beyond_the_balance_is_refused() -> None:
            error = (
                scenario(BankAccount)
                .given(MoneyDeposited(amount=500), MoneyWithdrawn(amount=200))
                .when(lambda account: account.withdraw(400))
                .then_raises(InsufficientFunds, match="300 left")
            )
            assert str(error) == "300 left, not 400"

        test_a_withdrawal_beyond_the_balance_is_refused()  # as pytest would call it
    """
    return Scenario(aggregate_type, aggregate_id)


def _names(events: tuple[DomainEvent, ...]) -> str:
    return "[" + ", ".join(type(e).__qualname__ for e in events) + "]" if events else "no events"
