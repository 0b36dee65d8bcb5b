"""domain: aggregates, their typed events, the repository that stores them, and decisions
across streams (conditional appends on queries of types and tags)."""

from eventcraft.eventstore import EVENT_VERSION

from .aggregate import Aggregate, command
from .async_decisions import AsyncDecisions
from .async_repository import AsyncRepository
from .catalog import CatalogedType, CatalogError, EventCatalog, Readers
from .compatibility import (
    CompatibilityMode,
    SchemaProblem,
    assert_compatible,
    check_compatibility,
    compatibility_report,
)
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
from .stored_schemas import StoredEventsVerification, StoredTypeVersion, verify_stored_events
from .testing import Scenario, scenario
from .upcasting import Upcaster

__all__ = [
    "EVENT_VERSION",
    "Aggregate",
    "AggregateNotFound",
    "AsyncDecisions",
    "AsyncRepository",
    "CatalogError",
    "CatalogedType",
    "CommandContext",
    "CompatibilityMode",
    "Decision",
    "DecisionConflict",
    "DecisionProjection",
    "Decisions",
    "DomainError",
    "DomainEvent",
    "EventCatalog",
    "EventDecodingError",
    "EventRegistry",
    "EventType",
    "NoUpcastPath",
    "Readers",
    "RegistrationError",
    "Repository",
    "Scenario",
    "SchemaProblem",
    "State",
    "StoredEventsVerification",
    "StoredTypeVersion",
    "UnknownEventType",
    "Upcaster",
    "assert_compatible",
    "caused_by",
    "check_compatibility",
    "command",
    "command_context",
    "compatibility_report",
    "current_context",
    "evolve",
    "evolves",
    "scenario",
    "verify_stored_events",
]
