"""An event as the App's code reads it: decoded and upcast by the App's registry
(`EventRegistry.decode`, what aggregates and projections are given), or why it does not
decode. One decoding path: the console shows what the code would see, not a guess of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic_core import PydanticSerializationError

from eventcraft.domain import EventDecodingError
from eventcraft.eventstore import EVENT_VERSION, RecordedEvent

from ..app import App


@dataclass(frozen=True)
class TypedEvent:
    """An event decoded by the App's registry, or the error its decoding raised."""

    stored_version: object
    """The metadata's `EVENT_VERSION` as stored (1 when it has none)."""
    class_name: str = ""
    """`module:QualifiedName` of the class it was decoded into."""
    version: int | None = None
    """The schema version of that class."""
    data: dict[str, Any] | None = None
    """The decoded event's fields, as JSON would hold them; None when it did not decode."""
    error: str | None = None
    """Why it did not decode (its type unknown, no upcast path, data that does not fit)."""

    @property
    def upcast(self) -> bool:
        """Whether it was upcast from an older version on the way."""
        return self.version is not None and self.stored_version != self.version


def typed_event(app: App, event: RecordedEvent) -> TypedEvent | None:
    """`event` decoded by `app`'s registry; None when the App names no registry."""
    registry = app.registry
    if registry is None:
        return None
    stored = event.metadata.get(EVENT_VERSION, 1)
    try:
        decoded = registry.decode(event)
    except EventDecodingError as error:
        return TypedEvent(stored, error=str(error))
    cls = type(decoded)
    entry = registry.type_of(cls)
    try:
        data = decoded.model_dump(mode="json")
    except PydanticSerializationError as error:
        return TypedEvent(
            stored,
            f"{cls.__module__}:{cls.__qualname__}",
            entry.version,
            error=f"decoded, but its fields do not serialize as JSON: {error}",
        )
    return TypedEvent(stored, f"{cls.__module__}:{cls.__qualname__}", entry.version, data)
