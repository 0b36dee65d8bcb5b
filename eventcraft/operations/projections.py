"""Operating an App's projections: where each stands, catching up, rebuilding, and the
error store (parked events retried or discarded). Every shell shows what these return.

Each function opens a `ProjectionRunner` on the App's read-model database for
the length of the call; it follows nothing in the background.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

from eventcraft.eventstore import EventStore, EventStoreError, RecordedEvent
from eventcraft.projections import (
    Database,
    Definition,
    DefinitionError,
    Fold,
    ParkedEvent,
    ParkedEventNotFound,
    ProjectionError,
    ProjectionRunner,
    ProjectionStatus,
    ProjectionStopped,
    Subscription,
    checkpoint_positions,
    never_run,
)

from ..app import App
from .errors import InputError, NotFound, Problems
from .log import LogFilter, log_events


@dataclass(frozen=True)
class ProjectionState(ProjectionStatus):
    """Where one projection stands against the log: the runner's status, and its kind."""

    kind: str
    """fold, projection or subscription."""
    never_run: bool = False
    """No runner has set it up yet: its database has no checkpoints, and nothing was
    created to say so."""


@dataclass(frozen=True)
class Parked:
    """An event a projection's handler failed on, kept until retried or discarded."""

    projection: str
    position: int
    event_id: str
    stream_id: str
    version: int
    type: str
    error: str
    """The last exception, as `Type: message`."""
    attempts: int
    parked_at: datetime
    traceback: str


@dataclass(frozen=True)
class CaughtUp:
    """What catching one projection up did."""

    name: str
    before: int
    """Its checkpoint before."""
    after: int
    """Its checkpoint after."""
    held_by: str | None
    """Another runner holding its lease, which was left to it (nothing was done)."""
    stopped: str | None
    """Why a handler failure stopped it, if one did (the event is parked)."""


@dataclass(frozen=True)
class Rebuilt:
    name: str
    generation: int
    """The generation of tables now serving."""
    position: int
    """Its checkpoint after the swap."""
    events: int
    seconds: float


@dataclass(frozen=True)
class Settled:
    """A parked event retried (applied) or discarded, and where its projection stands."""

    projection: str
    position: int
    action: str
    """retried or discarded."""
    checkpoint: int
    parked_left: int
    """Events still parked for the projection."""


Progress = Callable[[int], None]
"""Told the number of events done so far (of the total the caller was told)."""


def status(store: EventStore, app: App) -> list[ProjectionState]:
    """Every projection of the App: checkpoint, lag, lease, parked events, stop; all as
    never run while no runner has set up the App's read-model database."""
    kinds = {d.name: _kind(d) for d in app.projections}
    set_up = _set_up(store, app)
    if set_up:
        with _runner(store, app) as runner:
            found = runner.status()
    else:
        found = never_run(store, app.projections)
    return [
        ProjectionState(kind=kinds[s.name], never_run=not set_up, **dataclasses.asdict(s))
        for s in found
    ]


def state(store: EventStore, app: App, name: str) -> ProjectionState:
    """Where the projection `name` stands; `NotFound` if the App has none of that name."""
    _checked_names(app, [name])
    (found,) = (s for s in status(store, app) if s.name == name)
    return found


def lag(store: EventStore, app: App, names: Sequence[str] = ()) -> int:
    """The events the named projections (all, if none) are behind the head, summed."""
    chosen = set(_checked_names(app, names) or [d.name for d in app.projections])
    return sum(s.lag_events for s in status(store, app) if s.name in chosen)


def reads(app: App, name: str) -> LogFilter:
    """The events the projection `name` reads: its categories, types (all, if None) and
    query."""
    _checked_names(app, [name])
    (definition,) = (d for d in app.projections if d.name == name)
    return LogFilter(
        categories=definition.categories or (),
        types=definition.types or (),
        query=definition.query,
    )


def waiting(store: EventStore, app: App, name: str, *, limit: int) -> list[RecordedEvent]:
    """The first `limit` events the projection has still to apply: its message store."""
    checkpoint = state(store, app, name).position
    return list(log_events(store, after=checkpoint, limit=limit, where=reads(app, name)))


def catch_up(
    store: EventStore, app: App, names: Sequence[str] = (), *, progress: Progress | None = None
) -> list[CaughtUp]:
    """Apply the log up to its head to the named projections (all, if none), one by one.

    One stopped by a failing event does not keep the others from catching up;
    one whose lease another runner holds is left to that runner.
    """
    chosen = _checked_names(app, names) or [d.name for d in app.projections]
    done: list[CaughtUp] = []
    applied = 0
    with _runner(store, app) as runner:
        before = {s.name: s for s in runner.status()}
        for name in chosen:
            stopped = None
            try:
                runner.catch_up(name)
            except ProjectionStopped as error:
                stopped = str(error)
            after = {s.name: s for s in runner.status()}[name]
            held = after.owner if after.owner and after.owner != runner.owner else None
            done.append(CaughtUp(name, before[name].position, after.position, held, stopped))
            applied += before[name].lag_events
            if progress is not None:
                progress(applied)
    return done


def rebuild(
    store: EventStore,
    app: App,
    name: str,
    *,
    progress: bool | Callable[[int, int], None] = False,
) -> Rebuilt:
    """Replay the projection from the start into new tables and swap them in.

    The old tables serve queries until the swap; a failing handler fails the
    rebuild and leaves them serving. `progress` draws the runner's own bar, or is
    told the position reached and the position the replay goes to.
    """
    _checked_names(app, [name])
    with _runner(store, app) as runner:
        try:
            report = runner.rebuild(name, progress=progress)
        except DefinitionError as error:
            raise InputError(str(error)) from error
        except (ProjectionError, EventStoreError):
            raise
        except Exception as error:
            raise Problems(
                f"rebuild of {name!r} failed, the old tables still serve: "
                f"{type(error).__name__}: {error}"
            ) from error
    return Rebuilt(report.name, report.generation, report.position, report.events, report.seconds)


def parked(
    store: EventStore,
    app: App,
    name: str | None = None,
    *,
    after: int = 0,
    limit: int | None = None,
) -> list[Parked]:
    """The events in the error store of one projection, or of every one, in position order:
    of each, those after position `after`, at most `limit` (a page of one projection's:
    the next starts after the last position listed)."""
    names = _checked_names(app, [name]) if name is not None else [d.name for d in app.projections]
    if not _set_up(store, app):
        return []
    with _runner(store, app) as runner:
        return [
            _parked(event) for n in names for event in runner.parked(n, after=after, limit=limit)
        ]


def parked_event(store: EventStore, app: App, name: str, position: int) -> Parked:
    """The event parked at `position` by `name`; `NotFound` if none is."""
    found = parked(store, app, name, after=position - 1, limit=1) if position > 0 else []
    if found and found[0].position == position:
        return found[0]
    raise NotFound(f"projection {name!r} has no event parked at position {position}")


def retry_parked(store: EventStore, app: App, name: str, position: int) -> Settled:
    """Apply the parked event now and forget it; `Problems` if it fails again (it stays
    parked) or is no longer parked. A projection it stopped moves past it."""
    _checked_names(app, [name])
    with _runner(store, app) as runner:
        try:
            runner.retry_parked(name, position)
        except ParkedEventNotFound as error:
            raise Problems(f"{error} (no longer: it was retried or discarded meanwhile)") from error
        except (ProjectionError, EventStoreError):
            raise
        except Exception as error:
            raise Problems(
                f"projection {name!r}: the event at position {position} failed again, "
                f"and stays parked: {type(error).__name__}: {error}"
            ) from error
        return _settled(runner, name, position, "retried")


def discard_parked(store: EventStore, app: App, name: str, position: int) -> Settled:
    """Forget the parked event without applying it; `Problems` if it is no longer parked."""
    _checked_names(app, [name])
    with _runner(store, app) as runner:
        try:
            runner.discard_parked(name, position)
        except ParkedEventNotFound as error:
            raise Problems(f"{error} (no longer: it was retried or discarded meanwhile)") from error
        return _settled(runner, name, position, "discarded")


# --- plumbing -------------------------------------------------------------------


@contextmanager
def _runner(store: EventStore, app: App) -> Iterator[ProjectionRunner]:
    with ProjectionRunner(store, app.projections, database=app.database) as runner:
        yield runner


def _set_up(store: EventStore, app: App) -> bool:
    """Whether a runner has set up the App's read-model database (its checkpoints)."""
    # Opening a runner creates the tables, checkpoint rows and read models of every
    # projection: one opened only to look would write where nothing ran yet.
    database = Database.of(app.database, store)
    try:
        return checkpoint_positions(database, ()) is not None
    finally:
        database.close()


def _checked_names(app: App, names: Sequence[str]) -> list[str]:
    """`names`, each a projection of the App; `NotFound` naming those it has otherwise."""
    known = [d.name for d in app.projections]
    for name in names:
        if name not in known:
            has = ", ".join(known) or "none"
            raise NotFound(f"no projection {name!r} in the app (it has: {has})")
    return list(names)


def _kind(definition: Definition) -> str:
    if isinstance(definition, Fold):
        return "fold"
    if isinstance(definition, Subscription):
        return "subscription"
    return "projection"


def _parked(event: ParkedEvent) -> Parked:
    return Parked(
        projection=event.projection,
        position=event.position,
        event_id=event.event_id,
        stream_id=event.stream_id,
        version=event.version,
        type=event.type,
        error=event.error,
        attempts=event.attempts,
        parked_at=datetime.fromtimestamp(event.parked_at, UTC),
        traceback=event.traceback,
    )


def _settled(runner: ProjectionRunner, name: str, position: int, action: str) -> Settled:
    (state,) = (s for s in runner.status() if s.name == name)
    return Settled(name, position, action, state.position, state.parked)
