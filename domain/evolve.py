"""Evolving state: pure handlers, one per event type, declared on the state class.

A state is a pydantic model whose `@evolves` methods each take one event and
return the next state, leaving `self` as it was::

    class AccountState(State):
        balance: int = 0

        @evolves
        def deposited(self, event: MoneyDeposited) -> AccountState:
            return self.replace(balance=self.balance + event.amount)

(`State.replace` is `model_copy(update=...)` at half the cost; any frozen
pydantic model works as a state.)

The event class comes from the annotation of the handler's event parameter,
or from the decorator's argument: `@evolves(MoneyDeposited)`.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any, TypeVar, overload

from pydantic import BaseModel

from .errors import RegistrationError
from .event import DomainEvent

S = TypeVar("S", bound=BaseModel)
F = TypeVar("F", bound=Callable[..., Any])
Handler = Callable[[Any, DomainEvent], Any]

_MARK = "__eventcraft_evolves__"
_FROM_ANNOTATION = object()
_handlers: dict[type[BaseModel], dict[type[DomainEvent], Handler]] = {}


@overload
def evolves(target: type[DomainEvent]) -> Callable[[F], F]: ...
@overload
def evolves(target: F) -> F: ...
def evolves(target: Any) -> Any:
    """Mark a state method as the handler of one event type.

    The event class is the annotation of the method's event parameter, or the
    decorator's argument.

    Example::

        from eventcraft.domain import DomainEvent, EventRegistry, State, evolve, evolves

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

            @evolves(MoneyWithdrawn)  # the class named, for a handler left unannotated
            def withdrawn(self, event):
                return self.replace(balance=self.balance - event.amount)

        state = evolve(AccountState(), MoneyDeposited(amount=500))
        assert evolve(state, MoneyWithdrawn(amount=200)).balance == 300
    """
    if isinstance(target, type):
        if not issubclass(target, DomainEvent):
            raise RegistrationError(f"@evolves({target.__qualname__}): not a DomainEvent class")

        def mark(handler: F) -> F:
            setattr(handler, _MARK, target)
            return handler

        return mark
    setattr(target, _MARK, _FROM_ANNOTATION)
    return target


def evolve(state: S, event: DomainEvent) -> S:
    """The state after `event`: what the state's handler for its type returns.

    Example::

        from functools import reduce

        from eventcraft.domain import DomainEvent, EventRegistry, State, evolve, evolves

        bank_events = EventRegistry()

        @bank_events.event("MoneyDeposited")
        class MoneyDeposited(DomainEvent):
            amount: int

        class AccountState(State):
            balance: int = 0

            @evolves
            def deposited(self, event: MoneyDeposited) -> "AccountState":
                return self.replace(balance=self.balance + event.amount)

        history = [MoneyDeposited(amount=500), MoneyDeposited(amount=250)]
        assert reduce(evolve, history, AccountState()).balance == 750
    """
    state_type = type(state)
    table = _handlers.get(state_type) or handlers_of(state_type)
    handler = table.get(type(event))
    if handler is None:
        raise RegistrationError(
            f"{state_type.__name__} has no @evolves handler for {type(event).__name__}"
        )
    new = handler(state, event)
    # Identity first: this runs for every event an aggregate loads.
    if type(new) is not state_type and not isinstance(new, state_type):
        raise RegistrationError(
            f"{state_type.__name__}.{handler.__name__} returned "
            f"{type(new).__name__}, not the next {state_type.__name__}"
        )
    return new


def handlers_of(state_type: type[BaseModel]) -> dict[type[DomainEvent], Handler]:
    """Every handler of `state_type` (and its bases) by event class."""
    table: dict[type[DomainEvent], Handler] = {}
    for klass in reversed(state_type.__mro__):
        for name, member in vars(klass).items():
            target = getattr(member, _MARK, None)
            if target is None:
                continue
            event_type = (
                _event_parameter(state_type, name, member) if target is _FROM_ANNOTATION else target
            )
            table[event_type] = member
    _handlers[state_type] = table
    return table


def _event_parameter(state_type: type, name: str, handler: Callable[..., Any]) -> type[DomainEvent]:
    where = f"{state_type.__name__}.{name}"
    parameters = list(inspect.signature(handler).parameters)
    if len(parameters) != 2:
        raise RegistrationError(f"{where} must take (self, event), not {parameters}")
    try:
        hints = typing.get_type_hints(handler)
    except NameError as error:
        raise RegistrationError(
            f"{where}: cannot resolve its annotations ({error}); "
            f"name the event class in the decorator: @evolves(EventClass)"
        ) from error
    event_type = hints.get(parameters[1])
    if not (isinstance(event_type, type) and issubclass(event_type, DomainEvent)):
        raise RegistrationError(
            f"{where}: annotate its event parameter with a DomainEvent class, "
            f"or name it in the decorator: @evolves(EventClass)"
        )
    return event_type
