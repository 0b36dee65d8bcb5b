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
    """The metadata a command's events are saved with."""

    correlation_id: str
    """The conversation: the same across every message that follows from one request."""
    causation_id: str
    """The message (command or event) that caused these events."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Anything else to carry in the metadata: a user id, a tenant, a trace id."""

    def metadata(self) -> dict[str, Any]:
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
    """The innermost `command_context` or `caused_by` around the caller, if any."""
    return _current.get()


@contextmanager
def command_context(
    *, correlation_id: str | None = None, causation_id: str | None = None, **extra: Any
) -> Iterator[CommandContext]:
    """Save events recorded inside with these ids and `extra` in their metadata.

    Unset ids come from the enclosing context, else from a new id.
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
    """A `command_context` for handling `event`: its conversation, caused by it."""
    correlation = event.metadata.get("correlation_id")
    return command_context(
        correlation_id=str(correlation) if correlation else str(event.id),
        causation_id=str(event.id),
        **extra,
    )
