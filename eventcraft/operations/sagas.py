"""Operating an App's sagas: listing instances, one instance's timeline, and the actions
on parked or running ones (retry, compensate, resolve, cancel). Every shell shows what these return.

An instance is read from its stream, transition by transition, with the
sagas package's own `SagaState.evolve`; the actions go through an
`Orchestrator`, which re-checks the instance's status as it records them.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from eventcraft.eventstore import EventStore, RecordedEvent
from eventcraft.sagas import (
    SAGA_CATEGORY,
    Bug,
    Orchestrator,
    SagaIndex,
    SagaNotParked,
    SagaState,
    SagaTransition,
    saga_of_stream,
    saga_timeline,
    stream_of,
)

from ..app import App
from .errors import InputError, NotFound, Problems

STATUSES = ("running", "compensating", "completed", "compensated", "parked", "resolved")
"""An instance's status, from started to settled."""


@dataclass(frozen=True)
class SagaSummary:
    """One instance: which saga, where it stands, and when it started and last moved."""

    name: str
    saga_id: str
    stream_id: str
    status: str
    """running, compensating, completed, compensated, parked or resolved."""
    step: str | None
    """The step its latest transition concerns (the one under way, failed or parked on)."""
    version: int
    """Its transitions so far."""
    started_at: datetime
    updated_at: datetime
    failure: str | None
    """Why it is compensating, or was compensated."""
    parked_because: str | None


@dataclass(frozen=True)
class SagaDetail:
    saga: SagaSummary
    data: dict[str, Any]
    """What the instance was started with."""
    correlation_id: str
    results: dict[str, Any]
    """The succeeded steps' results, by step."""
    transitions: list[SagaTransition]
    bug: Bug | None = None
    """What a step raised undeclared, while the instance is parked on it: its type, its
    message (`FORGOTTEN` once the saga's subject is forgotten) and its traceback."""


@dataclass(frozen=True)
class SagaPage:
    """A page of instances, in stream order, and where the next one starts."""

    instances: list[SagaSummary]
    next_after: str | None
    """The stream the next page lists after; None when this page reached the last one."""
    exhausted: bool
    """Whether the page stopped on the streams it may examine before it was full (a
    filter that few instances pass)."""


def instances(
    store: EventStore, app: App, *, status: str | None = None, name: str | None = None
) -> list[SagaSummary]:
    """The instances in the store, of any saga (or of `name`), in stream order."""
    return [found for _, found in _instances(store, app, status, name, None, None) if found]


def instances_page(
    store: EventStore,
    app: App,
    *,
    status: str | None = None,
    name: str | None = None,
    after: str | None = None,
    limit: int,
    budget: int = 5_000,
) -> SagaPage:
    """At most `limit` instances after the stream `after`, as `instances` lists them,
    examining at most `budget` streams: a page costs what it shows, not the store."""
    found: list[SagaSummary] = []
    last = None
    read = _instances(store, app, status, name, after, budget + 1)
    for examined, (stream, summary) in enumerate(read):
        if examined == budget or len(found) == limit:
            return SagaPage(found, last, exhausted=len(found) < limit)
        last = stream
        if summary is not None:
            found.append(summary)
    return SagaPage(found, None, exhausted=False)


def _instances(
    store: EventStore,
    app: App,
    status: str | None,
    name: str | None,
    after: str | None,
    streams: int | None,
) -> Iterator[tuple[str, SagaSummary | None]]:
    """Each saga stream after `after` (of `name`'s alone, if given), at most `streams`,
    with its instance if it has `status` (any, if None)."""
    if status is not None and status not in STATUSES:
        raise InputError(f"no saga status {status!r} (there are: {', '.join(STATUSES)})")
    prefix = ""
    if name is not None:
        _check_name(app, name)
        # Streams sort by id: `name`'s instances are the range after its prefix.
        prefix = stream_of(name, "")
        after = max(after or "", prefix)
    for info in store.list_streams(category=SAGA_CATEGORY, after=after or None, limit=streams):
        if not info.stream_id.startswith(prefix):
            return
        read = _read(store, info.stream_id)
        shown = read is not None and (status is None or read[0].status == status)
        yield info.stream_id, _summary(*read) if shown and read is not None else None


def parked(
    store: EventStore, app: App, *, after: str | None = None, limit: int | None = None
) -> list[SagaSummary]:
    """The parked instances of the App's sagas, in stream order: those after the stream
    `after`, at most `limit`."""
    # The sagas' own index of parked streams: only the page's instances are read.
    names = {saga.name for saga in app.sagas}
    streams = (
        s
        for s in _parked_streams(store)
        if saga_of_stream(s)[0] in names and (after is None or s > after)
    )
    chosen = sorted(streams)[:limit]
    read = (_read(store, stream) for stream in chosen)
    return [_summary(*r) for r in read if r is not None and r[0].status == "parked"]


class _Indexes:
    """One `SagaIndex` a store, kept for as long as the store is: a process that lists
    the parked instances again and again (the console, on each request) reads only the
    transitions appended since it last did, not the whole `saga` category each time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: weakref.WeakKeyDictionary[EventStore, SagaIndex] = weakref.WeakKeyDictionary()

    def parked(self, store: EventStore) -> set[str]:
        """The streams of the parked instances in `store`, as of now."""
        # One refresh at a time: the index's position and sets move together.
        with self._lock:
            index = self._kept.get(store)
            if index is None:
                index = self._kept[store] = SagaIndex(store)
            index.refresh()
            return set(index.parked)


_parked_streams = _Indexes().parked


def saga(store: EventStore, app: App, name: str, saga_id: str) -> SagaDetail:
    """The instance and its every transition; `NotFound` for an unknown saga or id."""
    _check_name(app, name)
    read = _read(store, stream_of(name, saga_id))
    if read is None:
        raise NotFound(f"no {name!r} saga with id {saga_id!r}")
    state, events = read
    return SagaDetail(
        saga=_summary(state, events),
        data=state.data,
        correlation_id=state.correlation_id,
        results=dict(state.results),
        transitions=saga_timeline(state.stream_id, events),
        bug=state.bug,
    )


def expect(store: EventStore, app: App, name: str, saga_id: str, status: str) -> SagaSummary:
    """The instance, if its status is `status`; `Problems` saying what it is otherwise."""
    found = saga(store, app, name, saga_id).saga
    if found.status != status:
        raise Problems(f"{found.stream_id} is {found.status}, not {status}")
    return found


def retry(store: EventStore, app: App, name: str, saga_id: str) -> SagaSummary:
    """Run a parked instance's compensations again, here and now, from where they stopped.

    `Problems` if it is no longer parked, or if a compensation fails again
    (it is parked again).
    """
    _check_name(app, name)
    orchestrator = Orchestrator(store, app.sagas)
    try:
        orchestrator.retry(name, saga_id)
    except SagaNotParked as error:
        raise Problems(str(error)) from error
    found = _summary_of(store, name, saga_id)
    if found.status == "parked":
        raise Problems(f"{found.stream_id} was retried and is parked again: {found.parked_because}")
    return found


def compensate(store: EventStore, app: App, name: str, saga_id: str, reason: str) -> SagaSummary:
    """Compensate a parked instance on an operator's word, here and now: what its steps
    did is undone. `Problems` if it is no longer parked, or if a compensation fails (it
    is parked again)."""
    _check_name(app, name)
    if not reason.strip():
        raise InputError("a compensation ordered by hand needs a reason")
    try:
        Orchestrator(store, app.sagas).compensate(name, saga_id, reason)
    except SagaNotParked as error:
        raise Problems(str(error)) from error
    found = _summary_of(store, name, saga_id)
    if found.status == "parked":
        raise Problems(
            f"{found.stream_id} was compensated and is parked again: {found.parked_because}"
        )
    return found


def resolve(store: EventStore, app: App, name: str, saga_id: str, note: str) -> SagaSummary:
    """Mark a parked instance settled by hand, with the operator's note; nothing runs for
    it again. `Problems` if it is no longer parked."""
    _check_name(app, name)
    if not note.strip():
        raise InputError("a resolution needs a note saying how it was settled")
    try:
        Orchestrator(store, app.sagas).resolve(name, saga_id, note)
    except SagaNotParked as error:
        raise Problems(str(error)) from error
    return _summary_of(store, name, saga_id)


def cancel(store: EventStore, app: App, name: str, saga_id: str, reason: str) -> SagaSummary:
    """Stop a running instance: it fails, and the App's orchestrators compensate what it
    did. `Problems` if it is no longer running."""
    _check_name(app, name)
    if not Orchestrator(store, app.sagas).cancel(name, saga_id, reason):
        found = _summary_of(store, name, saga_id)
        raise Problems(f"{found.stream_id} is {found.status}, not running")
    return _summary_of(store, name, saga_id)


# --- reading an instance ------------------------------------------------------------


def _check_name(app: App, name: str) -> None:
    known = [s.name for s in app.sagas]
    if name not in known:
        raise NotFound(f"no saga {name!r} in the app (it has: {', '.join(known) or 'none'})")


def _read(store: EventStore, stream: str) -> tuple[SagaState, list[RecordedEvent]] | None:
    events = list(store.read_stream(stream))
    if not events:
        return None
    name, saga_id = saga_of_stream(stream)
    state = SagaState(name=name, saga_id=saga_id, stream_id=stream)
    for event in events:
        state.evolve(event)
    return state, events


def _summary_of(store: EventStore, name: str, saga_id: str) -> SagaSummary:
    read = _read(store, stream_of(name, saga_id))
    if read is None:
        raise NotFound(f"no {name!r} saga with id {saga_id!r}")
    return _summary(*read)


def _summary(state: SagaState, events: list[RecordedEvent]) -> SagaSummary:
    steps = (e.data.get("step") for e in reversed(events))
    return SagaSummary(
        name=state.name,
        saga_id=state.saga_id,
        stream_id=state.stream_id,
        status=state.status,
        step=next((s for s in steps if isinstance(s, str)), None),
        version=state.version,
        started_at=events[0].recorded_at,
        updated_at=events[-1].recorded_at,
        failure=state.failure,
        parked_because=state.parked_because,
    )
