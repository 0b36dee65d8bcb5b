"""Aggregate mechanics: pure evolve handlers, all-or-nothing commands, declarations checked."""

from __future__ import annotations

import types
from typing import Any

import pytest
from eventcraft.domain import (
    Aggregate,
    DomainError,
    DomainEvent,
    EventRegistry,
    RegistrationError,
    command,
    evolve,
    evolves,
)
from pydantic import BaseModel, ConfigDict

registry = EventRegistry()


@registry.event("Counted")
class Counted(DomainEvent):
    by: int


@registry.event("Noted")
class Noted(DomainEvent):
    text: str


@registry.event("Unhandled")
class Unhandled(DomainEvent):
    pass


class TooMany(DomainError):
    pass


class CounterState(BaseModel):
    model_config = ConfigDict(frozen=True)
    total: int = 0
    notes: tuple[str, ...] = ()

    @evolves
    def counted(self, event: Counted) -> CounterState:
        return self.model_copy(update={"total": self.total + event.by})

    @evolves(Noted)  # the explicit form, for handlers whose annotation cannot be resolved
    def noted(self, event: Any) -> CounterState:
        return self.model_copy(update={"notes": (*self.notes, event.text)})


class Counter(Aggregate[CounterState]):
    category = "counter"
    registry = registry

    @command
    def count_each(self, *steps: int) -> None:
        for by in steps:
            self.record(Counted(by=by))
            if self.state.total > 10:
                raise TooMany(f"total {self.state.total} passes 10")

    def count_each_unguarded(self, *steps: int) -> None:
        for by in steps:
            self.record(Counted(by=by))
            if self.state.total > 10:
                raise TooMany(f"total {self.state.total} passes 10")


def test_recording_evolves_the_state_and_keeps_the_event() -> None:
    counter = Counter("c")
    counter.count_each(2, 3)
    counter.record(Noted(text="hi"))
    assert counter.state == CounterState(total=5, notes=("hi",))
    assert counter.pending_events == (Counted(by=2), Counted(by=3), Noted(text="hi"))
    assert (counter.version, counter.stored_version, counter.stream_id) == (3, 0, "counter-c")


def test_evolve_leaves_the_old_state_as_it_was() -> None:
    before = CounterState(total=1)
    after = evolve(before, Counted(by=2))
    assert (before.total, after.total) == (1, 3)


def test_a_failing_command_undoes_the_events_it_recorded() -> None:
    counter = Counter("c")
    counter.count_each(4)
    with pytest.raises(TooMany):
        counter.count_each(5, 5)
    assert counter.state.total == 4
    assert counter.pending_events == (Counted(by=4),)


def test_without_the_command_decorator_a_failure_leaves_its_events() -> None:
    # What @command is for: this is the half-done state it prevents.
    counter = Counter("c")
    with pytest.raises(TooMany):
        counter.count_each_unguarded(5, 5, 5)
    assert counter.state.total == 15


def test_an_event_without_a_handler_is_a_clear_error_and_records_nothing() -> None:
    counter = Counter("c")
    with pytest.raises(
        RegistrationError, match="CounterState has no @evolves handler for Unhandled"
    ):
        counter.record(Unhandled())
    assert counter.pending_events == ()


def test_an_unregistered_event_is_refused_when_recorded() -> None:
    class Stray(DomainEvent):
        pass

    with pytest.raises(RegistrationError, match="Stray is not registered"):
        Counter("c").record(Stray())


def test_a_handler_that_returns_something_else_than_the_state_is_caught() -> None:
    class Broken(BaseModel):
        @evolves(Counted)
        def counted(self, event: Counted) -> None:  # forgot to return the new state
            pass

    with pytest.raises(RegistrationError, match="returned NoneType, not the next Broken"):
        evolve(Broken(), Counted(by=1))


def test_a_handler_whose_event_type_cannot_be_resolved_says_how_to_fix_it() -> None:
    class Local(DomainEvent):
        pass

    class State(BaseModel):
        @evolves
        def local(self, event: Local) -> State:
            return self

    with pytest.raises(RegistrationError, match=r"@evolves\(EventClass\)"):
        evolve(State(), Local())


@pytest.mark.parametrize(
    ("attributes", "message"),
    [
        ({"category": "bank-account", "registry": registry}, "without '-'"),
        ({"category": "", "registry": registry}, "non-empty str"),
        ({"category": "c"}, "registry must be the EventRegistry"),
        ({"category": "c", "registry": registry, "snapshot_every": 0}, "snapshot_every"),
        ({"category": "c", "registry": registry, "schema_version": 0}, "schema_version"),
    ],
)
def test_an_aggregate_declared_wrongly_is_refused_at_class_creation(
    attributes: dict[str, Any], message: str
) -> None:
    with pytest.raises(RegistrationError, match=message):
        types.new_class("Wrong", (Aggregate[CounterState],), {}, lambda ns: ns.update(attributes))


def test_a_state_must_have_defaults_for_a_new_aggregate() -> None:
    class Needy(BaseModel):
        required: int

    class NeedyAggregate(Aggregate[Needy]):
        category = "needy"
        registry = registry

    with pytest.raises(RegistrationError, match="needs a default"):
        NeedyAggregate("x")


@pytest.mark.parametrize("aggregate_id", ["", None, 5])
def test_an_aggregate_id_must_be_a_non_empty_string(aggregate_id: object) -> None:
    with pytest.raises(ValueError, match="non-empty str"):
        Counter(aggregate_id)  # type: ignore[arg-type]
