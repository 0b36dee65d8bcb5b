"""The command context: where the metadata of the events a command records comes from.

Every event a repository saves carries a `correlation_id` (the business
conversation it belongs to) and a `causation_id` (the message that caused
it). Set them around a command with `command_context(...)`, or from the
event being handled with `caused_by(event)`; with neither, each save starts
a conversation of its own.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from eventcraft.eventstore import RecordedEvent


@dataclass(frozen=True, slots=True)
class CommandContext:
    """The metadata a command's events are saved with.

    Example::

        from eventcraft.domain import CommandContext, command_context

        with command_context(correlation_id="request-42", user="ann") as context:
            assert isinstance(context, CommandContext)
        assert context.metadata() == {
            "user": "ann", "correlation_id": "request-42", "causation_id": "request-42",
        }
        fresh = CommandContext.new()  # a conversation of its own: both ids one new id
        assert fresh.correlation_id == fresh.causation_id
    """

    correlation_id: str
    """The conversation: the same across every message that follows from one request."""
    causation_id: str
    """The message (command or event) that caused these events."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Anything else to carry in the metadata: a user id, a tenant, a trace id."""

    def metadata(self) -> dict[str, Any]:
        """`extra` with the two ids: the metadata a repository's save gives each event."""
        return {
            **self.extra,
            "correlation_id": self.correlation_id,
            "causation_id": self.causation_id,
        }

    @classmethod
    def new(cls) -> CommandContext:
        """A context that starts a conversation: both ids are one new id."""
        first = str(uuid.uuid4())
        return cls(first, first)


_current: ContextVar[CommandContext | None] = ContextVar("eventcraft_command", default=None)


def current_context() -> CommandContext | None:
    """The innermost `command_context` or `caused_by` around the caller, if any.

    Example::

        from eventcraft.domain import command_context, current_context

        assert current_context() is None  # outside any, each save starts a conversation
        with command_context(correlation_id="request-42", tenant="acme"):
            with command_context(causation_id="step-2"):
                inner = current_context()
        assert (inner.correlation_id, inner.causation_id) == ("request-42", "step-2")
        assert inner.extra == {"tenant": "acme"}
    """
    return _current.get()


@contextmanager
def command_context(
    *, correlation_id: str | None = None, causation_id: str | None = None, **extra: Any
) -> Iterator[CommandContext]:
    """Save events recorded inside with these ids and `extra` in their metadata.

    Unset ids come from the enclosing context, else from a new id.

    Example::

        from eventcraft.domain import (
            Aggregate, DomainEvent, EventRegistry, Repository, State, command_context, evolves,
        )
        from eventcraft.eventstore import EventStore

        bank_events = EventRegistry()

        @bank_events.event("MoneyDeposited")
        class MoneyDeposited(DomainEvent):
            amount: int

        class AccountState(State):
            balance: int = 0

            @evolves
            def deposited(self, event: MoneyDeposited) -> "AccountState":
                return self.replace(balance=self.balance + event.amount)

        class BankAccount(Aggregate[AccountState]):
            category = "account"
            registry = bank_events

            def deposit(self, amount: int) -> None:
                self.record(MoneyDeposited(amount=amount))

        store = EventStore.open("sqlite:///bank.db")
        accounts = Repository(store, BankAccount)
        with command_context(correlation_id="request-42", user="ann"):
            accounts.execute("7", lambda account: account.deposit(500), create=True)
        (saved,) = store.read_stream("account-7")
        assert saved.metadata["correlation_id"] == saved.metadata["causation_id"] == "request-42"
        assert saved.metadata["user"] == "ann"
        store.close()
    """
    outer = _current.get()
    correlation = correlation_id or (outer.correlation_id if outer else str(uuid.uuid4()))
    context = CommandContext(
        correlation_id=correlation,
        causation_id=causation_id or correlation,
        extra={**(outer.extra if outer else {}), **extra},
    )
    token = _current.set(context)
    try:
        yield context
    finally:
        _current.reset(token)


def caused_by(event: RecordedEvent, **extra: Any) -> AbstractContextManager[CommandContext]:
    """A `command_context` for handling `event`: its conversation, caused by it.

    Example::

        from eventcraft.domain import (
            Aggregate, DomainEvent, EventRegistry, Repository, State, caused_by, evolves,
        )
        from eventcraft.eventstore import EventStore, NewEvent

        bank_events = EventRegistry()

        @bank_events.event("MoneyDeposited")
        class MoneyDeposited(DomainEvent):
            amount: int

        class AccountState(State):
            balance: int = 0

            @evolves
            def deposited(self, event: MoneyDeposited) -> "AccountState":
                return self.replace(balance=self.balance + event.amount)

        class BankAccount(Aggregate[AccountState]):
            category = "account"
            registry = bank_events

            def deposit(self, amount: int) -> None:
                self.record(MoneyDeposited(amount=amount))

        store = EventStore.open("sqlite:///bank.db")
        accounts = Repository(store, BankAccount)
        paid = NewEvent("PaymentReceived", {"amount": 500}, {"correlation_id": "order-9"})
        store.append("payment-1", [paid])
        (received,) = store.read_stream("payment-1")
        with caused_by(received):  # a handler of the payment deposits it
            amount = received.data["amount"]
            accounts.execute("7", lambda account: account.deposit(amount), create=True)
        (deposited,) = store.read_stream("account-7")
        assert deposited.metadata["correlation_id"] == "order-9"
        assert deposited.metadata["causation_id"] == str(received.id)
        store.close()
    """
    correlation = event.metadata.get("correlation_id")
    return command_context(
        correlation_id=str(correlation) if correlation else str(event.id),
        causation_id=str(event.id),
        **extra,
    )
