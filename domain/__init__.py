"""domain: aggregates, their typed events, and the repository that stores them."""

from eventcraft.eventstore import EVENT_VERSION

from .aggregate import Aggregate, command
from .async_repository import AsyncRepository
from .context import CommandContext, caused_by, command_context, current_context
from .errors import (
    AggregateNotFound,
    DomainError,
    EventDecodingError,
    NoUpcastPath,
    RegistrationError,
    UnknownEventType,
)
from .event import DomainEvent
from .evolve import evolve, evolves
from .registry import EventRegistry, EventType
from .repository import Repository
from .state import State
from .testing import Scenario, scenario
from .upcasting import Upcaster

__all__ = [
    "EVENT_VERSION",
    "Aggregate",
    "AggregateNotFound",
    "AsyncRepository",
    "CommandContext",
    "DomainError",
    "DomainEvent",
    "EventDecodingError",
    "EventRegistry",
    "EventType",
    "NoUpcastPath",
    "RegistrationError",
    "Repository",
    "Scenario",
    "State",
    "UnknownEventType",
    "Upcaster",
    "caused_by",
    "command",
    "command_context",
    "current_context",
    "evolve",
    "evolves",
    "scenario",
]
