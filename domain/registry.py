"""`EventRegistry`: event classes by stable type name and schema version.

The stored type name is the one given at registration, never the Python
class path, so classes can move between modules without breaking stored
events. Each stored event carries its schema version in its metadata
(`event_version`); reading an older one runs the registry's upcasters.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar
from uuid import UUID

import orjson
from eventcraft.eventstore import EVENT_VERSION, EncodedEvent, NewEvent, RecordedEvent, new_event_id
from pydantic import ValidationError

from .checks import positive_int
from .errors import EventDecodingError, RegistrationError, UnknownEventType
from .event import DomainEvent
from .upcasting import Upcaster, UpcasterChain

E = TypeVar("E", bound=DomainEvent)
U = TypeVar("U", bound=Upcaster)


@dataclass(frozen=True, slots=True)
class EventType:
    """A registered event class.

    Example::

        from eventcraft.domain import DomainEvent, EventRegistry, EventType

        bank_events = EventRegistry()

        @bank_events.event("MoneyDeposited", version=2)
        class MoneyDeposited(DomainEvent):
            amount: int

        entry = bank_events.type_of(MoneyDeposited)
        assert entry == EventType("MoneyDeposited", 2, MoneyDeposited)
        assert bank_events.types["MoneyDeposited"] == entry and entry.version_text == "2"
    """

    name: str
    """The stable name events of this class are stored under."""
    version: int
    """The schema version this code writes and reads into."""
    cls: type[DomainEvent]
    version_text: str = field(init=False)
    """`version` as `EncodedEvent.event_version` holds it: JSON text."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "version_text", str(self.version))


class EventRegistry:
    """Event classes by stable name; encodes them for the store and decodes them back.

    Example::

        from eventcraft.domain import DomainEvent, EventRegistry
        from eventcraft.eventstore import EventStore

        bank_events = EventRegistry()

        @bank_events.event("MoneyDeposited")  # stored under this name, whatever the class's
        class MoneyDeposited(DomainEvent):
            amount: int

        store = EventStore.open("sqlite:///bank.db")
        deposited = bank_events.to_new_event(MoneyDeposited(amount=500), {"user": "ann"})
        store.append("account-7", [deposited])
        (stored,) = store.read_stream("account-7")
        assert (stored.type, stored.data) == ("MoneyDeposited", {"amount": 500})
        assert stored.metadata == {"user": "ann", "event_version": 1}
        assert bank_events.decode(stored) == MoneyDeposited(amount=500)
        store.close()
    """

    def __init__(self) -> None:
        self._by_name: dict[str, EventType] = {}
        self._by_class: dict[type[DomainEvent], EventType] = {}
        self._upcasters = UpcasterChain()

    def event(self, name: str, *, version: int = 1) -> Callable[[type[E]], type[E]]:
        """Class decorator: register the class under `name` at schema `version`."""

        def register(cls: type[E]) -> type[E]:
            self.register(cls, name, version=version)
            return cls

        return register

    def register(self, cls: type[DomainEvent], name: str, *, version: int = 1) -> None:
        if not (isinstance(cls, type) and issubclass(cls, DomainEvent)):
            raise RegistrationError(f"{cls!r} is not a DomainEvent subclass")
        if not isinstance(name, str) or not name or len(name) > 255:
            raise RegistrationError(f"{cls.__name__}: {name!r} is not a usable event type name")
        positive_int(f"{name!r}: version", version)
        if name in self._by_name:
            raise RegistrationError(
                f"{name!r} is already registered, for {self._by_name[name].cls.__qualname__}"
            )
        if cls in self._by_class:
            raise RegistrationError(
                f"{cls.__qualname__} is already registered as {self._by_class[cls].name!r}"
            )
        entry = EventType(name, version, cls)
        self._by_name[name] = entry
        self._by_class[cls] = entry

    def upcaster(self, name: str, *, from_version: int) -> Callable[[U], U]:
        """Decorator: a step turning `name`'s data at `from_version` into `from_version + 1`."""
        positive_int(f"upcaster for {name!r}: from_version", from_version)

        def add(step: U) -> U:
            self._upcasters.add(name, from_version, step)
            return step

        return add

    def upcasters_of(self, name: str) -> Mapping[int, Upcaster]:
        """The upcasters registered for the type `name`, by the version each starts from.

        Example::

            from eventcraft.domain import DomainEvent, EventRegistry

            registry = EventRegistry()

            @registry.event("Renamed", version=2)
            class Renamed(DomainEvent):
                new_name: str

            @registry.upcaster("Renamed", from_version=1)
            def to_v2(data: dict) -> dict:
                return {"new_name": data.pop("name")}

            assert list(registry.upcasters_of("Renamed")) == [1]
        """
        return self._upcasters.of(name)

    @property
    def types(self) -> Mapping[str, EventType]:
        """Every registered event type by name."""
        return dict(self._by_name)

    def type_of(self, event: DomainEvent | type[DomainEvent]) -> EventType:
        cls = event if isinstance(event, type) else type(event)
        entry = self._by_class.get(cls)
        if entry is None:
            raise RegistrationError(
                f"{cls.__qualname__} is not registered; decorate it with @registry.event(name)"
            )
        return entry

    def to_new_event(
        self, event: DomainEvent, metadata: Mapping[str, Any], id: UUID | None = None
    ) -> NewEvent:
        """`event` ready to append, its schema version in its metadata, its tags its own."""
        entry = self.type_of(event)
        return NewEvent(
            type=entry.name,
            data=event,
            metadata={**metadata, EVENT_VERSION: entry.version},
            id=id or new_event_id(),
            tags=tuple(event.event_tags()),
        )

    def decode(self, recorded: RecordedEvent) -> DomainEvent:
        """The domain event `recorded` holds, upcast to today's schema: what a repository's
        load folds into its aggregate, for a reader holding a `RecordedEvent`.

        The stored schema version is the metadata's `event_version` (1 when
        absent); an older one runs the type's upcasters in order (from 1 to 2,
        2 to 3, ...) on a copy of the data, and the result is validated into
        the registered class. Stored events never change. Raises
        `UnknownEventType` when no class is registered under `recorded.type`,
        `NoUpcastPath` when a step is missing, fails, or the event was written
        by a newer schema, and `EventDecodingError` when the data does not fit
        the class; each names the stream, version and type.

        Give the registry to a projection (`Projection`, `Fold`, `Subscription`
        or `ProcessManager`, `registry=`) and its functions receive each event
        decoded by this method, as a projections `TypedEvent`.
        """
        entry = self._by_name.get(recorded.type) or self._entry(recorded, recorded.stream_id)
        data = recorded.data
        stored = recorded.metadata.get(EVENT_VERSION, 1)
        if stored != entry.version:
            data = self._upcasters.upcast(recorded, recorded.stream_id, data, stored, entry.version)
        try:
            # The validator itself, as decode_encoded calls it: model_validate only wraps
            # it, and this runs for every event a projection or a verify reads.
            return entry.cls.__pydantic_validator__.validate_python(data)  # type: ignore[no-any-return]
        except ValidationError as error:
            raise not_fitting(recorded, recorded.stream_id, entry, error) from error

    def decode_encoded(self, encoded: EncodedEvent, stream_id: str) -> DomainEvent:
        """The domain event `encoded` (an event of `stream_id`) holds, upcast to today's schema.

        An event at today's schema goes from JSON to its class in one step,
        with no dict in between: the repository's loads are made of these.
        """
        entry = self._by_name.get(encoded.type) or self._entry(encoded, stream_id)
        stored_text = encoded.event_version
        try:
            # Comparing the text, not parsing it: this runs for every event an
            # aggregate loads, and events are read far more often than upcast.
            if stored_text == entry.version_text:
                # The validator itself: model_validate_json only wraps it.
                return entry.cls.__pydantic_validator__.validate_json(encoded.data)  # type: ignore[no-any-return]
            stored = 1 if stored_text is None else orjson.loads(stored_text)
            validator = entry.cls.__pydantic_validator__
            if stored == entry.version:
                return validator.validate_json(encoded.data)  # type: ignore[no-any-return]
            data = orjson.loads(encoded.data)
            data = self._upcasters.upcast(encoded, stream_id, data, stored, entry.version)
            return validator.validate_python(data)  # type: ignore[no-any-return]
        except ValidationError as error:
            raise not_fitting(encoded, stream_id, entry, error) from error

    def _entry(self, event: RecordedEvent | EncodedEvent, stream_id: str) -> EventType:
        entry = self._by_name.get(event.type)
        if entry is None:
            raise UnknownEventType(
                stream_id, event.version, event.type, "no event class registered"
            )
        return entry


def not_fitting(
    event: RecordedEvent | EncodedEvent, stream_id: str, entry: EventType, error: ValidationError
) -> EventDecodingError:
    """The error of `event` (of `stream_id`), whose data `entry`'s class refused."""
    return EventDecodingError(
        stream_id,
        event.version,
        event.type,
        f"its data does not fit {entry.cls.__qualname__} (schema version {entry.version}): {error}",
    )
