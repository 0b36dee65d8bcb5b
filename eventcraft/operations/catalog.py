"""The event catalog as an operator reads it: each event type of the App's registry and
each type stored that it does not register, with what the store holds of each version
(`EventStore.count_types`, counted without reading events), who reads it, its upcasters,
its personal fields and its versions' JSON Schemas.

The catalog itself is `schema.catalog_of`'s, the one `eventcraft schema export` writes;
this joins the store's counts to it and says how today's code reads each stored version.

The counts are kept per store in this process (`_Tallies`), as the sagas' parked index
is: the first call counts the whole log (about a second a million events on PostgreSQL),
each later one only the events appended since. Stored events never change; only a
retention run removes some, and the next call after one counts the whole log again.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from eventcraft.domain import CatalogedType, EventCatalog, Readers
from eventcraft.eventstore import EventStore, TypeCount, check_name

from ..app import App
from .errors import NotFound
from .schema import catalog_of

AS_IS = "as is"
UPCAST = "upcast"
NO_PATH = "no upcast path"
NEWER = "newer than the code"
NOT_A_VERSION = "not a version"
UNREGISTERED = "no class registered"
READS = (AS_IS, UPCAST)
"""How a stored version is read (`StoredVersion.read`): those that today's code reads."""


@dataclass(frozen=True)
class StoredVersion:
    """The events of a type stored at one schema version, and how today's code reads them."""

    version: int
    """0 for events whose metadata names no positive int (`TypeCount.event_version`)."""
    events: int
    last_position: int
    last_recorded_at: datetime
    read: str
    """`AS_IS` (today's version), `UPCAST` (an upcaster chain reaches today's), `NO_PATH`,
    `NEWER`, `NOT_A_VERSION` or `UNREGISTERED`."""

    @property
    def readable(self) -> bool:
        return self.read in READS


@dataclass(frozen=True)
class EventTypeEntry:
    """One event type: what the App's code says of it and what the store holds of it."""

    name: str
    registered: bool
    """Whether the App's registry has a class for it."""
    version: int | None = None
    """The version today's code writes; None when unregistered."""
    class_name: str = ""
    """`module:QualifiedName` of its class."""
    stored: tuple[StoredVersion, ...] = ()
    """What the store holds of it, by version."""
    readers: Readers = field(default_factory=Readers)
    upcasters: tuple[int, ...] = ()
    """The versions its upcasters start from."""
    personal: Mapping[str, str] = field(default_factory=dict)
    """Its personal fields, each with whose data it holds."""
    schemas: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)
    """The JSON Schema of each version the catalog knows: today's, and older ones a
    committed catalog carried."""

    @property
    def events(self) -> int:
        return sum(s.events for s in self.stored)

    @property
    def last_seen(self) -> StoredVersion | None:
        """The stored version whose last event is the type's last."""
        return max(self.stored, key=lambda s: s.last_position, default=None)

    @property
    def unreadable(self) -> int:
        """Events stored at a version today's code cannot read."""
        return sum(s.events for s in self.stored if not s.readable)


@dataclass(frozen=True)
class CatalogPage:
    """A page of the catalog's types, by name."""

    registry: bool
    """Whether the App names an event registry; without one, only stored types are listed."""
    types: list[EventTypeEntry]
    next_after: str | None
    """The name the next page starts after; None on the last page."""


def catalog_page(
    store: EventStore,
    app: App,
    *,
    after: str | None = None,
    limit: int | None = None,
    previous: EventCatalog | None = None,
) -> CatalogPage:
    """The App's event types and the store's, by name, those after `after`, at most
    `limit`; older versions' schemas from `previous` (a committed catalog), if given.

    The store's events are counted by `count_types`: the whole log's at the first call,
    those appended since at the next (the module's docstring)."""
    catalog = catalog_of(app, previous) if app.registry is not None else None
    counts: dict[str, list[TypeCount]] = {}
    for counted in _type_counts(store):
        counts.setdefault(counted.type, []).append(counted)
    names = sorted(set(counts) | set(catalog.types if catalog else ()))
    if after is not None:
        names = [name for name in names if name > after]
    shown = names if limit is None else names[:limit]
    more = limit is not None and len(names) > limit
    return CatalogPage(
        registry=catalog is not None,
        types=[_entry(name, catalog, counts.get(name, [])) for name in shown],
        next_after=shown[-1] if more and shown else None,
    )


def event_type(
    store: EventStore, app: App, name: str, *, previous: EventCatalog | None = None
) -> EventTypeEntry:
    """One event type, registered or stored; `NotFound` if it is neither."""
    check_name("event type", name)  # what the store refuses to hold is a 400, not a 404
    catalog = catalog_of(app, previous) if app.registry is not None else None
    counts = [counted for counted in _type_counts(store) if counted.type == name]
    if not counts and (catalog is None or name not in catalog.types):
        raise NotFound(f"no event type {name!r}: the App registers none and the store holds none")
    return _entry(name, catalog, counts)


def _entry(name: str, catalog: EventCatalog | None, counts: Sequence[TypeCount]) -> EventTypeEntry:
    cataloged = catalog.types.get(name) if catalog is not None else None
    if cataloged is None:
        stored = tuple(_stored(c, UNREGISTERED) for c in counts)
        return EventTypeEntry(name, registered=False, stored=stored)
    return EventTypeEntry(
        name,
        registered=True,
        version=cataloged.version,
        class_name=cataloged.class_name,
        stored=tuple(_stored(c, _read(cataloged, c.event_version)) for c in counts),
        readers=cataloged.readers,
        upcasters=cataloged.upcasters,
        personal=cataloged.personal,
        schemas=dict(sorted(cataloged.schemas.items())),
    )


def _stored(counted: TypeCount, read: str) -> StoredVersion:
    return StoredVersion(
        counted.event_version,
        counted.events,
        counted.last_position,
        counted.last_recorded_at,
        read,
    )


def _read(cataloged: CatalogedType, version: int) -> str:
    """How today's code reads events of `cataloged` stored at `version`, as the registry
    decides when it decodes them (`EventRegistry.decode`)."""
    if version < 1:
        return NOT_A_VERSION
    if version == cataloged.version:
        return AS_IS
    if version > cataloged.version:
        return NEWER
    steps = set(cataloged.upcasters)
    return UPCAST if all(v in steps for v in range(version, cataloged.version)) else NO_PATH


class _Tally:
    """The counts of the log up to `upto`, as of the retention run `epoch`."""

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.upto = 0
        self.counts: dict[tuple[str, int], TypeCount] = {}

    def add(self, counted: TypeCount) -> None:
        key = (counted.type, counted.event_version)
        kept = self.counts.get(key)
        # Counted after `upto`: its last event is after the kept one's.
        self.counts[key] = (
            counted if kept is None else replace(counted, events=kept.events + counted.events)
        )


class _Tallies:
    """One `_Tally` a store, kept for as long as the store is (module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: weakref.WeakKeyDictionary[EventStore, _Tally] = weakref.WeakKeyDictionary()

    def counts(self, store: EventStore) -> list[TypeCount]:
        """`store.count_types()` as of now, by type and version."""
        # One count at a time: a tally's `upto` and its counts move together.
        with self._lock:
            runs = store.retention.runs()
            epoch = runs[-1].run if runs else 0
            kept = self._kept.get(store)
            if kept is None or kept.epoch != epoch:
                kept = self._kept[store] = _Tally(epoch)
            # To a mark read first: the events up to it can no longer change, so the
            # next count goes on from there without missing or counting one twice.
            head = store.high_water_mark()
            if head > kept.upto:
                for counted in store.count_types(kept.upto, head):
                    kept.add(counted)
                kept.upto = head
            return [kept.counts[key] for key in sorted(kept.counts)]


_type_counts = _Tallies().counts
