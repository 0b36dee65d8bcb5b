"""A bank account: open, deposit, withdraw within an overdraft limit, close.

Shows the domain API end to end: typed events registered by stable names,
a pure state with `@evolves` handlers, commands that refuse to break the
rules, snapshots, and an upcaster for an event whose schema changed.
"""

from __future__ import annotations

from typing import Any

from eventcraft.domain import (
    Aggregate,
    DomainError,
    DomainEvent,
    EventRegistry,
    State,
    command,
    evolves,
)
from pydantic import Field

bank_events = EventRegistry()


@bank_events.event("AccountOpened")
class AccountOpened(DomainEvent):
    owner: str
    overdraft_limit_cents: int = Field(ge=0)


@bank_events.event("MoneyDeposited", version=2)
class MoneyDeposited(DomainEvent):
    amount_cents: int = Field(gt=0)
    reference: str = ""


@bank_events.upcaster("MoneyDeposited", from_version=1)
def _deposits_in_cents(data: dict[str, Any]) -> dict[str, Any]:
    # Version 1 stored euros as a float; cents as an int cannot round.
    return {"amount_cents": round(data.pop("amount") * 100), "reference": ""}


@bank_events.event("MoneyWithdrawn")
class MoneyWithdrawn(DomainEvent):
    amount_cents: int = Field(gt=0)


@bank_events.event("AccountClosed")
class AccountClosed(DomainEvent):
    pass


class AccountError(DomainError):
    """A command the account refuses."""


class AccountNotOpen(AccountError):
    pass


class AccountAlreadyOpen(AccountError):
    pass


class AccountIsClosed(AccountError):
    pass


class InsufficientFunds(AccountError):
    pass


class BalanceNotZero(AccountError):
    pass


class AccountState(State):
    owner: str = ""
    is_open: bool = False
    is_closed: bool = False
    balance_cents: int = 0
    overdraft_limit_cents: int = 0

    @evolves
    def opened(self, event: AccountOpened) -> AccountState:
        return self.replace(
            owner=event.owner, is_open=True, overdraft_limit_cents=event.overdraft_limit_cents
        )

    @evolves
    def deposited(self, event: MoneyDeposited) -> AccountState:
        return self.replace(balance_cents=self.balance_cents + event.amount_cents)

    @evolves
    def withdrawn(self, event: MoneyWithdrawn) -> AccountState:
        return self.replace(balance_cents=self.balance_cents - event.amount_cents)

    @evolves
    def closed(self, event: AccountClosed) -> AccountState:
        return self.replace(is_closed=True)


class BankAccount(Aggregate[AccountState]):
    category = "account"
    registry = bank_events
    snapshot_every = 50

    def open(self, owner: str, overdraft_limit_cents: int = 0) -> None:
        if self.state.is_open:
            raise AccountAlreadyOpen(f"account {self.id!r} is already open")
        self.record(AccountOpened(owner=owner, overdraft_limit_cents=overdraft_limit_cents))

    def deposit(self, amount_cents: int, reference: str = "") -> None:
        self._require_open()
        self.record(MoneyDeposited(amount_cents=amount_cents, reference=reference))

    def withdraw(self, amount_cents: int) -> None:
        self._require_open()
        state = self.state
        if state.balance_cents - amount_cents < -state.overdraft_limit_cents:
            raise InsufficientFunds(
                f"account {self.id!r}: withdrawing {amount_cents} from {state.balance_cents} "
                f"passes the overdraft limit of {state.overdraft_limit_cents}"
            )
        self.record(MoneyWithdrawn(amount_cents=amount_cents))

    @command
    def close(self, payout_to_zero: bool = False) -> None:
        """Close the account; with `payout_to_zero`, withdraw a positive balance first."""
        self._require_open()
        if payout_to_zero and self.state.balance_cents > 0:
            self.record(MoneyWithdrawn(amount_cents=self.state.balance_cents))
        if self.state.balance_cents != 0:
            raise BalanceNotZero(
                f"account {self.id!r} holds {self.state.balance_cents}; it must hold 0 to close"
            )
        self.record(AccountClosed())

    def _require_open(self) -> None:
        if not self.state.is_open:
            raise AccountNotOpen(f"account {self.id!r} is not open")
        if self.state.is_closed:
            raise AccountIsClosed(f"account {self.id!r} is closed")
