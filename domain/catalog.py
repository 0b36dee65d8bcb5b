"""`EventCatalog`: an application's events as a contract, written to a file kept with its code.

The catalog lists every registered event type: the version today's code writes, the
JSON Schema of each version the catalog has seen (today's from the pydantic class,
older ones carried over from the catalog it was made after), the versions its upcasters
start from, the fields sealed as personal data and whose they are, and who reads it
(aggregates, projections, sagas). Types once listed and no longer registered stay, as
retired, so that a new class reusing the name is caught (`compatibility.py`).

Its JSON form is stable and diff-friendly (sorted keys, two-space indent, one trailing
newline): the same registry gives the same bytes, and a change to an event shows as a
few lines in review.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson
from eventcraft.eventstore import Personal

from .aggregate import Aggregate
from .evolve import handlers_of
from .json_schema import Schema
from .registry import EventRegistry

CATALOG_FORMAT = 1
"""The version of the catalog file's own layout (`"format"` in the file)."""

_KIND = "eventcraft event catalog"


class CatalogError(ValueError):
    """A catalog file that cannot be read: not JSON, not a catalog, or of a later format.

    Example::

        from pathlib import Path
        from eventcraft.domain import CatalogError, EventCatalog

        Path("events.schema.json").write_text("{}")
        try:
            EventCatalog.read("events.schema.json")
        except CatalogError as error:
            assert "is not an eventcraft event catalog" in str(error)
    """


@dataclass(frozen=True, slots=True)
class Readers:
    """Who reads an event type, each by its durable name.

    Example::

        from eventcraft.domain import DomainEvent, EventCatalog, EventRegistry, Readers

        registry = EventRegistry()

        @registry.event("OrderPlaced")
        class OrderPlaced(DomainEvent):
            order_id: str

        catalog = EventCatalog.of(registry, projections={"order-list": ["OrderPlaced"]})
        assert catalog.types["OrderPlaced"].readers == Readers(projections=("order-list",))
    """

    aggregates: tuple[str, ...] = ()
    """The categories of the aggregates whose state evolves by it."""
    projections: tuple[str, ...] = ()
    """The projections, folds and subscriptions that read it (or read every type)."""
    sagas: tuple[str, ...] = ()
    """The sagas a process manager starts, signals or cancels from it."""


@dataclass(frozen=True, slots=True)
class CatalogedType:
    """One event type as the catalog holds it.

    Example::

        from eventcraft.domain import DomainEvent, EventCatalog, EventRegistry

        registry = EventRegistry()

        @registry.event("OrderPlaced", version=2)
        class OrderPlaced(DomainEvent):
            order_id: str

        @registry.upcaster("OrderPlaced", from_version=1)
        def to_v2(data: dict) -> dict:
            return {"order_id": data["id"]}

        placed = EventCatalog.of(registry).types["OrderPlaced"]
        assert (placed.version, placed.upcasters) == (2, (1,))
        assert placed.schema["properties"]["order_id"]["type"] == "string"
    """

    name: str
    """The stable name its events are stored under."""
    version: int
    """The schema version the code writes (for a retired type, the last it wrote)."""
    class_name: str
    """Where its class is, `module:QualifiedName`: for the reader, not compared."""
    schemas: Mapping[int, Schema]
    """The JSON Schema of each version the catalog has seen, today's included."""
    upcasters: tuple[int, ...] = ()
    """The versions its upcasters start from (1 for the step from 1 to 2)."""
    personal: Mapping[str, str] = field(default_factory=dict)
    """Its personal fields, each with whose data it holds: the field naming the
    subject, `"(stream)"` for the stream's, or `"(function)"`."""
    readers: Readers = Readers()

    @property
    def schema(self) -> Schema:
        """The JSON Schema of `version`."""
        return self.schemas[self.version]


@dataclass(frozen=True, slots=True)
class EventCatalog:
    """An application's event types: what its code writes and reads, kept as a contract.

    Made from an `EventRegistry` (`EventCatalog.of`), written to a file
    (`to_json`) committed beside the code, and read back (`read`) to check a changed
    registry against it (`check_compatibility`) before events already stored meet it.

    Example::

        from eventcraft.domain import DomainEvent, EventCatalog, EventRegistry

        registry = EventRegistry()

        @registry.event("OrderPlaced")
        class OrderPlaced(DomainEvent):
            order_id: str
            cents: int

        catalog = EventCatalog.of(registry)
        catalog.write("events.schema.json")
        assert EventCatalog.read("events.schema.json") == catalog
        assert catalog.types["OrderPlaced"].schema["required"] == ["order_id", "cents"]
    """

    types: Mapping[str, CatalogedType]
    """The registered types by name."""
    retired: Mapping[str, CatalogedType] = field(default_factory=dict)
    """Types an earlier catalog listed that the registry no longer has."""

    @classmethod
    def of(
        cls,
        registry: EventRegistry,
        *,
        previous: EventCatalog | None = None,
        aggregates: Iterable[type[Aggregate[Any]]] | None = None,
        projections: Mapping[str, Iterable[str] | None] | None = None,
        sagas: Mapping[str, Iterable[str]] | None = None,
    ) -> EventCatalog:
        """The catalog of `registry` today.

        `previous`, the catalog committed before, gives the older versions' schemas
        and the retired types. `aggregates` are searched for readers (by default every
        `Aggregate` subclass whose `registry` is this one); `projections` maps each
        projection's name to the types it reads (None: every type); `sagas` maps each
        saga's name to the types that start, signal or cancel it.
        """
        found = _aggregates_of(registry) if aggregates is None else list(aggregates)
        aggregate_readers = _aggregate_readers(registry, found)
        projection_readers = dict(projections or {})
        saga_readers = {name: set(types) for name, types in (sagas or {}).items()}
        old = previous.types if previous is not None else {}
        types: dict[str, CatalogedType] = {}
        for name, entry in sorted(registry.types.items()):
            schemas: dict[int, Schema] = {}
            before = old.get(name) or (previous.retired.get(name) if previous else None)
            if before is not None:
                schemas.update({v: s for v, s in before.schemas.items() if v < entry.version})
            schemas[entry.version] = entry.cls.model_json_schema()
            readers = Readers(
                aggregates=tuple(sorted(aggregate_readers.get(name, ()))),
                projections=tuple(
                    sorted(
                        p
                        for p, read in projection_readers.items()
                        if read is None or name in set(read)
                    )
                ),
                sagas=tuple(sorted(s for s, read in saga_readers.items() if name in read)),
            )
            types[name] = CatalogedType(
                name=name,
                version=entry.version,
                class_name=f"{entry.cls.__module__}:{entry.cls.__qualname__}",
                schemas=schemas,
                upcasters=tuple(registry.upcasters_of(name)),
                personal=_personal(entry.cls),
                readers=readers,
            )
        retired: dict[str, CatalogedType] = {}
        if previous is not None:
            for name, gone in [*previous.retired.items(), *previous.types.items()]:
                if name not in types:
                    retired[name] = replace(gone, readers=Readers())
        return cls(types, dict(sorted(retired.items())))

    def to_json(self) -> str:
        """The catalog as its file holds it: the same catalog, the same text."""
        document = {
            "catalog": _KIND,
            "format": CATALOG_FORMAT,
            "types": {name: _type_json(t) for name, t in self.types.items()},
            "retired": {name: _type_json(t) for name, t in self.retired.items()},
        }
        return (
            orjson.dumps(document, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2).decode(
                "utf-8"
            )
            + "\n"
        )

    def write(self, path: str | Path) -> None:
        """Writes `to_json()` to `path`, whole: a reader never sees half a catalog."""
        target = Path(path)
        partial = target.with_name(f".{target.name}.partial")
        partial.write_text(self.to_json(), encoding="utf-8")
        partial.replace(target)

    @classmethod
    def from_json(cls, text: str | bytes, *, source: str = "the catalog") -> EventCatalog:
        """The catalog `text` holds; `CatalogError`, naming `source`, when it is none."""
        try:
            document = orjson.loads(text)
        except orjson.JSONDecodeError as error:
            raise CatalogError(f"{source} is not JSON: {error}") from None
        if not isinstance(document, dict) or document.get("catalog") != _KIND:
            raise CatalogError(
                f"{source} is not an eventcraft event catalog "
                "(make one with `eventcraft schema export`)"
            )
        if document.get("format") != CATALOG_FORMAT:
            raise CatalogError(
                f"{source} has catalog format {document.get('format')!r}; this eventcraft "
                f"reads format {CATALOG_FORMAT}"
            )
        try:
            types = {n: _type_from(n, t) for n, t in dict(document["types"]).items()}
            retired = {n: _type_from(n, t) for n, t in dict(document.get("retired", {})).items()}
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise CatalogError(f"{source} is damaged: {type(error).__name__}: {error}") from None
        return cls(types, retired)

    @classmethod
    def read(cls, path: str | Path) -> EventCatalog:
        """The catalog in the file at `path`; `CatalogError` names the file if it is none."""
        try:
            text = Path(path).read_bytes()
        except OSError as error:
            raise CatalogError(f"cannot read the catalog {str(path)!r}: {error.strerror}") from None
        return cls.from_json(text, source=repr(str(path)))


def _aggregates_of(registry: EventRegistry) -> list[type[Aggregate[Any]]]:
    found: list[type[Aggregate[Any]]] = []
    pending: list[type[Any]] = list(Aggregate.__subclasses__())
    while pending:
        klass = pending.pop()
        pending.extend(klass.__subclasses__())
        if "category" in vars(klass) and getattr(klass, "registry", None) is registry:
            found.append(klass)
    return found


def _aggregate_readers(
    registry: EventRegistry, aggregates: Iterable[type[Aggregate[Any]]]
) -> dict[str, set[str]]:
    readers: dict[str, set[str]] = {}
    names = {entry.cls: name for name, entry in registry.types.items()}
    for aggregate in aggregates:
        for event_class in handlers_of(aggregate.state_type):
            name = names.get(event_class)
            if name is not None:
                readers.setdefault(name, set()).add(aggregate.category)
    return readers


def _personal(cls: type[Any]) -> dict[str, str]:
    found: dict[str, str] = {}
    for name, info in cls.model_fields.items():
        for mark in info.metadata:
            if isinstance(mark, Personal):
                subject = mark.subject
                key = info.serialization_alias or info.alias or name
                found[key] = (
                    "(stream)"
                    if subject is None
                    else subject
                    if isinstance(subject, str)
                    else "(function)"
                )
    return found


def _type_json(entry: CatalogedType) -> dict[str, Any]:
    return {
        "class": entry.class_name,
        "version": entry.version,
        "schemas": {str(v): s for v, s in sorted(entry.schemas.items())},
        "upcasters": list(entry.upcasters),
        "personal": dict(entry.personal),
        "readers": {
            "aggregates": list(entry.readers.aggregates),
            "projections": list(entry.readers.projections),
            "sagas": list(entry.readers.sagas),
        },
    }


def _type_from(name: str, data: Mapping[str, Any]) -> CatalogedType:
    version = data["version"]
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError(f"{name!r}: version {version!r} is not a positive int")
    schemas = {int(v): dict(s) for v, s in dict(data["schemas"]).items()}
    if version not in schemas:
        raise ValueError(f"{name!r}: no schema for its version {version}")
    readers = dict(data.get("readers", {}))
    return CatalogedType(
        name=name,
        version=version,
        class_name=str(data.get("class", "")),
        schemas=schemas,
        upcasters=tuple(int(v) for v in data.get("upcasters", [])),
        personal={str(k): str(v) for k, v in dict(data.get("personal", {})).items()},
        readers=Readers(
            aggregates=tuple(readers.get("aggregates", [])),
            projections=tuple(readers.get("projections", [])),
            sagas=tuple(readers.get("sagas", [])),
        ),
    )
