"""The domain layer's exceptions.

::

    DomainError                         base for your aggregates' broken invariants
    AggregateNotFound (LookupError)     no events in the aggregate's stream
    EventDecodingError (ValueError)     a stored event cannot become a domain event
    ├── UnknownEventType                no class registered for its type name
    └── NoUpcastPath                    no chain of upcasters from its version to today's
    RegistrationError (TypeError)       an event class, upcaster or aggregate declared wrongly
    DecisionConflict                    a decision overtaken by matching events, attempt after
                                        attempt (an `AppendConditionFailed` of the store)

Store errors (`WrongExpectedVersion`, `StoreUnavailable`, ...) pass through
unchanged: they are the store's to name.
"""

from __future__ import annotations

from eventcraft.eventstore import AppendConditionFailed


class DomainError(Exception):
    """A command broke a business rule. Subclass it for your own rules.

    A command that raises it records nothing.
    """


class AggregateNotFound(LookupError):
    """The aggregate's stream holds no events."""

    def __init__(self, aggregate_type: str, aggregate_id: str, stream_id: str) -> None:
        self.aggregate_type = aggregate_type
        self.aggregate_id = aggregate_id
        self.stream_id = stream_id
        super().__init__(f"no {aggregate_type} {aggregate_id!r}: stream {stream_id!r} is empty")


class EventDecodingError(ValueError):
    """A stored event that cannot be turned into a domain event; names where it is."""

    def __init__(self, stream_id: str, version: int, event_type: str, reason: str) -> None:
        self.stream_id = stream_id
        self.version = version
        self.event_type = event_type
        super().__init__(
            f"event {event_type!r} at version {version} of stream {stream_id!r}: {reason}"
        )


class UnknownEventType(EventDecodingError):
    """No event class is registered under the stored type name."""


class NoUpcastPath(EventDecodingError):
    """The stored event's schema version cannot be brought to the registered one."""

    def __init__(
        self, stream_id: str, version: int, event_type: str, stored: int, current: int, why: str
    ) -> None:
        self.stored_version = stored
        self.current_version = current
        super().__init__(
            stream_id,
            version,
            event_type,
            f"stored as schema version {stored}, registered as {current}: {why}",
        )


class RegistrationError(TypeError):
    """An event class, upcaster or aggregate declared in a way that cannot work."""


class DecisionConflict(AppendConditionFailed):
    """Every attempt of a decision found events matching its query stored after its read.

    Nothing was written. Carries the last attempt's refusal (`stream_id`,
    `query`, `after`, `position`) and how many attempts were made: rules
    that many writers contend for at once may need more, or fewer writers.
    """

    def __init__(
        self, stream_id: str, query: object, after: int | None, position: int, attempts: int
    ) -> None:
        super().__init__(stream_id, query, after, position)
        self.attempts = attempts
        self.args = (
            f"the decision was overtaken {attempts} times in a row, last by the event at "
            f"position {position} matching {query!r} (stream: {stream_id!r}); "
            "nothing was written",
        )

    def __reduce__(  # type: ignore[override]
        self,
    ) -> tuple[type[DecisionConflict], tuple[str, object, int | None, int, int]]:
        return (
            type(self),
            (self.stream_id, self.query, self.after, self.position, self.attempts),
        )
