"""domain: aggregates, their typed events, the repository that stores them, and decisions
across streams (conditional appends on queries of types and tags)."""

from eventcraft.eventstore import EVENT_VERSION

from .aggregate import Aggregate, command
from .async_decisions import AsyncDecisions
from .async_repository import AsyncRepository
from .context import CommandContext, caused_by, command_context, current_context
from .decision_rules import Decision, DecisionProjection
from .decisions import Decisions
from .errors import (
    AggregateNotFound,
    DecisionConflict,
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
    "AsyncDecisions",
    "AsyncRepository",
    "CommandContext",
    "Decision",
    "DecisionConflict",
    "DecisionProjection",
    "Decisions",
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
