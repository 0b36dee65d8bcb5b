"""Where a service stands at a glance: the log's head, its recent traffic, its projections
and sagas, and the two numbers an operator watches, what waits and what failed."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime

from eventcraft.eventstore import EventStore, ReplicaLag

from ..app import App
from . import projections, sagas
from .newest import Recent, recent
from .projections import ProjectionState


@dataclass(frozen=True)
class Badges:
    """What waits and what failed, as the navigation shows them on every page."""

    waiting: int
    """Events the projections have still to apply (their lag, summed)."""
    waiting_capped: bool
    """More wait than `waiting`: a projection's lag was counted only so far."""
    failed: int
    """Parked events of every projection, and parked saga instances."""
    parked_events: int
    parked_sagas: int


@dataclass(frozen=True)
class Overview:
    head: int
    high_water_mark: int
    recent: Recent
    projections: list[ProjectionState]
    sagas_by_status: dict[str, int]
    badges: Badges
    replica: ReplicaLag | None = None
    """How far the store's read replica is behind, when it reads one."""


def badges(store: EventStore, app: App) -> Badges:
    """What waits (projection lag) and what failed (parked events and sagas)."""
    # An App without projections opens no runner (and its database) for nothing.
    states = projections.status(store, app) if app.projections else []
    return _badges(states, len(sagas.parked(store, app)) if app.sagas else 0)


def overview(store: EventStore, app: App, *, now: datetime | None = None) -> Overview:
    """The log's head and recent traffic, each projection's state, sagas by status."""
    status = store.log_status()
    states = projections.status(store, app)
    by_status: Counter[str] = Counter()
    if app.sagas:
        by_status.update(found.status for found in sagas.instances(store, app))
    ordered = {s: by_status[s] for s in sagas.STATUSES if by_status[s]}
    return Overview(
        head=status.head,
        high_water_mark=status.high_water_mark,
        recent=recent(store, now=now),
        projections=states,
        sagas_by_status=ordered,
        badges=_badges(states, by_status["parked"]),
        replica=status.replica,
    )


def _badges(states: list[ProjectionState], parked_sagas: int) -> Badges:
    parked_events = sum(s.parked for s in states)
    return Badges(
        waiting=sum(s.lag_events for s in states),
        waiting_capped=any(s.lag_capped for s in states),
        failed=parked_events + parked_sagas,
        parked_events=parked_events,
        parked_sagas=parked_sagas,
    )
