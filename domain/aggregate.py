"""`Aggregate`: commands that check invariants and record events.

An aggregate holds a state (a pydantic model with `@evolves` handlers, see
`evolve.py`) and the events its commands recorded since it was loaded.
Commands decide: they read `self.state`, raise a `DomainError` when a rule
would break, and otherwise `record` events. Recording evolves the state at
once, so a command may record several events that build on each other.
"""

from __future__ import annotations

import functools
import typing
import uuid
from collections.abc import Callable
from typing import Any, ClassVar, Generic, TypeVar

from eventcraft.eventstore import new_event_id
from pydantic import BaseModel, ValidationError

from .checks import positive_int, positive_int_or_none
from .errors import RegistrationError
from .event import DomainEvent
from .evolve import evolve
from .registry import EventRegistry

S = TypeVar("S", bound=BaseModel)
M = TypeVar("M", bound=Callable[..., Any])


class Aggregate(Generic[S]):
    """Base of an aggregate whose state is `S`; subclasses set the class variables.

    Its commands are methods: each reads `self.state`, raises a `DomainError` to
    refuse, and `record`s the events it decides on, which evolve the state at once.

    Example::

        from eventcraft.domain import (
            Aggregate, DomainError, DomainEvent, EventRegistry, State, evolves,
        )

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
            category = "account"  # streams are named account-<id>
            registry = bank_events  # where its event classes are registered
            snapshot_every = 100  # optional: a snapshot each 100 events
            schema_version = 1  # bump when AccountState changes shape

            def deposit(self, amount: int) -> None:
                if amount <= 0:
                    raise DomainError(f"a deposit is positive, not {amount}")
                self.record(MoneyDeposited(amount=amount))

        account = BankAccount("7")
        account.deposit(500)
        account.deposit(250)
        assert account.state.balance == 750
        assert (account.stream_id, account.version, account.stored_version) == ("account-7", 2, 0)
        assert account.pending_events == (MoneyDeposited(amount=500), MoneyDeposited(amount=250))
    """

    category: ClassVar[str]
    """The durable name of the aggregate type: the category of its streams."""
    registry: ClassVar[EventRegistry]
    """The registry that encodes and decodes this aggregate's events."""
    snapshot_every: ClassVar[int | None] = None
    """Save a snapshot each time the version passes a multiple of this; None for never."""
    schema_version: ClassVar[int] = 1
    """The state's schema version: snapshots of another version are ignored."""
    state_type: ClassVar[type[BaseModel]]
    """`S`, taken from the class's base `Aggregate[S]`."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for base in getattr(cls, "__orig_bases__", ()):
            if typing.get_origin(base) is Aggregate:
                (state_type,) = typing.get_args(base)
                if not (isinstance(state_type, type) and issubclass(state_type, BaseModel)):
                    raise RegistrationError(
                        f"{cls.__qualname__}: Aggregate[...] takes a pydantic model class "
                        f"as its state, not {state_type!r}"
                    )
                cls.state_type = state_type
        if "category" in cls.__dict__:
            _check_declaration(cls)

    def __init__(self, aggregate_id: str) -> None:
        """A new aggregate with no events: its state is `S()`."""
        if not isinstance(aggregate_id, str) or not aggregate_id:
            raise ValueError(f"an aggregate id must be a non-empty str, not {aggregate_id!r}")
        self.id = aggregate_id
        try:
            self._state: S = typing.cast(S, self.state_type())
        except ValidationError as error:
            raise RegistrationError(
                f"{type(self).__qualname__}: every field of {self.state_type.__qualname__} "
                f"needs a default, the state of a new aggregate: {error}"
            ) from error
        self._stored_version = 0
        self._pending: list[tuple[DomainEvent, uuid.UUID]] = []

    @classmethod
    def stream_id_of(cls, aggregate_id: str) -> str:
        return f"{cls.category}-{aggregate_id}"

    @property
    def stream_id(self) -> str:
        return self.stream_id_of(self.id)

    @property
    def state(self) -> S:
        """The state after every stored and pending event."""
        return self._state

    @property
    def version(self) -> int:
        """The stream version the state reflects, pending events included."""
        return self._stored_version + len(self._pending)

    @property
    def stored_version(self) -> int:
        """The stream version when loaded or last saved: the save's expected version."""
        return self._stored_version

    @property
    def pending_events(self) -> tuple[DomainEvent, ...]:
        """Events recorded since the aggregate was loaded or saved, in order."""
        return tuple(event for event, _ in self._pending)

    def record(self, event: DomainEvent) -> None:
        """Evolve the state by `event` and keep it to be saved."""
        if not isinstance(event, DomainEvent):
            raise TypeError(f"record() takes a DomainEvent, not {type(event).__name__}")
        self.registry.type_of(event)  # an unregistered event would fail only at save
        self._state = evolve(self._state, event)
        # The id is fixed now, so saving this aggregate again after a lost
        # answer is an idempotent retry, not a second copy.
        self._pending.append((event, new_event_id()))

    def _restore(self, state: S, version: int) -> None:
        self._state = state
        self._stored_version = version
        self._pending.clear()

    def _saved(self, version: int) -> None:
        self._stored_version = version
        self._pending.clear()

    def __repr__(self) -> str:
        return f"<{type(self).__qualname__} {self.id!r} v{self.version} {self._state!r}>"


def command(method: M) -> M:
    """Make a command all-or-nothing: if it raises, the events it recorded are undone.

    Example::

        from eventcraft.domain import (
            Aggregate, DomainError, DomainEvent, EventRegistry, State, command, evolves,
        )

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

            @command
            def deposit_all(self, amounts: list[int]) -> None:
                for amount in amounts:  # records as it goes: all of them, or none
                    if amount <= 0:
                        raise DomainError(f"a deposit is positive, not {amount}")
                    self.record(MoneyDeposited(amount=amount))

        account = BankAccount("7")
        try:
            account.deposit_all([500, 250, -1])
        except DomainError:
            pass
        assert account.pending_events == () and account.state.balance == 0
    """

    @functools.wraps(method)
    def atomic(self: Aggregate[Any], *args: Any, **kwargs: Any) -> Any:
        state, pending = self._state, len(self._pending)
        try:
            return method(self, *args, **kwargs)
        except BaseException:
            self._state = state
            del self._pending[pending:]
            raise

    return typing.cast(M, atomic)


def _check_declaration(cls: type[Aggregate[Any]]) -> None:
    name = cls.__qualname__
    category = cls.category
    if not isinstance(category, str) or not category or "-" in category:
        raise RegistrationError(
            f"{name}.category must be a non-empty str without '-' "
            f"(it is the part of a stream id before the first '-'), not {category!r}"
        )
    if not isinstance(getattr(cls, "registry", None), EventRegistry):
        raise RegistrationError(f"{name}.registry must be the EventRegistry of its events")
    if not hasattr(cls, "state_type"):
        raise RegistrationError(f"{name} must subclass Aggregate[StateModel]")
    positive_int_or_none(f"{name}.snapshot_every", cls.snapshot_every)
    positive_int(f"{name}.schema_version", cls.schema_version)
