"""The event catalog of an App, its compatibility check and the verify of the stored log.

The domain does the work (`EventCatalog`, `check_compatibility`,
`verify_stored_events`); what is added here is what only the App knows: which of
its projections read which types, and which sagas its process managers start,
signal or cancel from them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from eventcraft.domain import (
    CatalogError,
    CompatibilityMode,
    EventCatalog,
    EventRegistry,
    SchemaProblem,
    StoredEventsVerification,
    StoredTypeVersion,
    check_compatibility,
    verify_stored_events,
)
from eventcraft.eventstore import EventStore
from eventcraft.projections import Definition, ProjectionError
from eventcraft.sagas import Awaiting, ProcessManager

from ..app import App
from .errors import InputError


def registry_of(app: App) -> EventRegistry:
    """The App's event registry; the schema commands need one."""
    if app.registry is None:
        raise InputError(
            "the App names no event registry: give App(registry=...) the EventRegistry "
            "its events are registered in"
        )
    return app.registry


def catalog_of(app: App, previous: EventCatalog | None = None) -> EventCatalog:
    """The App's catalog today, older versions and retired types carried from `previous`.

    Its sagas read the types their `wait_for` steps are signalled by, and those a process
    manager among its projections routes to them; its other projections, the types
    they name (or every type).
    """
    projections: dict[str, tuple[str, ...] | None] = {}
    sagas: dict[str, set[str]] = {}
    for saga in app.sagas:
        for step in saga.steps:
            if isinstance(step.action, Awaiting):  # signalled by events of that type
                sagas.setdefault(saga.name, set()).add(step.action.event_type)
    for definition in app.projections:
        manager = _process_manager(definition)
        if manager is not None:
            for route in manager.routes:
                sagas.setdefault(route.saga.name, set()).add(route.event_type)
        else:
            projections[definition.name] = _types_read(definition)
    return EventCatalog.of(
        registry_of(app), previous=previous, projections=projections, sagas=sagas
    )


def read_catalog(path: str | Path) -> EventCatalog:
    """The catalog committed at `path`."""
    try:
        return EventCatalog.read(path)
    except CatalogError as error:
        raise InputError(str(error)) from None


def export(app: App, output: Path | None, *, force: bool = False) -> EventCatalog:
    """The App's catalog, written to `output` if given.

    An existing catalog there is the previous one: its older versions' schemas and
    its retired types are kept. A file there that is no catalog is replaced only
    with `force`.
    """
    previous = None
    if output is not None and output.exists():
        try:
            previous = EventCatalog.read(output)
        except CatalogError as error:
            if not force:
                raise InputError(f"{error}; replace it with --force") from None
    catalog = catalog_of(app, previous)
    if output is not None:
        try:
            catalog.write(output)
        except OSError as error:
            raise InputError(f"cannot write {str(output)!r}: {error.strerror}") from None
    return catalog


def check(app: App, against: str | Path, mode: CompatibilityMode) -> list[SchemaProblem]:
    """What in the App's registry breaks reading events stored under `against`."""
    return check_compatibility(registry_of(app), read_catalog(against), mode=mode)


def verify(
    store: EventStore,
    app: App,
    *,
    after: int = 0,
    limit: int | None = None,
    sample: int | None = None,
) -> StoredEventsVerification:
    """The stored log read through the App's registry (`verify_stored_events`)."""
    return verify_stored_events(store, registry_of(app), after=after, limit=limit, sample=sample)


def verify_in_spark(url: str, app: App, master: str) -> StoredEventsVerification:
    """The store at `url` (and its archive, after retention) read through the App's
    registry as a Spark job on `master`: `verify`'s counts, for a log too large for one
    process. A run reads the whole log (no `after`, `limit` or sample)."""
    from . import spark  # the spark extra: imported only by a command that asks for it

    registry = registry_of(app)
    session = spark.session(spark.check_master(master))
    from eventcraft.projections.spark import verify_events

    try:
        counted = verify_events(session, url, registry)
    except ProjectionError as error:
        raise spark.translated(error) from error
    found = StoredEventsVerification()
    for row in counted:
        entry = registry.types.get(row.type)
        found.counts.append(
            StoredTypeVersion(
                row.type,
                row.event_version,
                events=row.events,
                failed=row.failed,
                first_failure=row.first_failure,
                error=row.error,
                last_position=row.last_position,
                last_recorded_at=row.last_recorded_at,
                registered_version=entry.version if entry else None,
            )
        )
        found.events += row.events
        found.failed += row.failed
        found.upto = max(found.upto, row.last_position)
    return found


def _process_manager(definition: Definition) -> ProcessManager | None:
    handler: Callable[..., object] | None = getattr(definition, "handler", None)
    owner = getattr(handler, "__self__", None)
    return owner if isinstance(owner, ProcessManager) else None


def _types_read(definition: Definition) -> tuple[str, ...] | None:
    """The types `definition` reads; None when it reads every type."""
    if definition.types is not None:
        return tuple(definition.types)
    if definition.query is not None and definition.query.items:
        found: list[str] = []
        for item in definition.query.items:
            if not item.types:  # an item of no types matches any type
                return None
            found.extend(item.types)
        return tuple(found)
    return None
