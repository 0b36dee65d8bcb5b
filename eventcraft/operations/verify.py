"""Verify a store: the store's check of its log (`verify_log`: versions, positions, ids,
snapshots, and what retention removed), and with the service's `App`, that no
projection's checkpoint is past the high-water mark.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from eventcraft.eventstore import EventStore, LogProblem, verify_log

if TYPE_CHECKING:
    from eventcraft.app import App


@dataclass(frozen=True)
class Verification:
    """What a verification read and found, as the shells show it."""

    events: int
    """Events read: the log up to the high-water mark taken when the pass began."""
    streams: int
    """Streams the events read belong to."""
    high_water_mark: int
    """The high-water mark the pass read up to."""
    low_water_mark: int
    """Where the log in the store begins to be whole, when the pass ended: 0 unless
    retention removed events at or below it (which are no gap)."""
    snapshots: int
    """Snapshots found and checked (streams that have one)."""
    projections: int | None
    """Projections whose checkpoints were checked; None when no App was given."""
    problems: list[LogProblem] = field(default_factory=list)
    """The first problems found, in the order found (`LogProblem.kind` says which)."""
    problem_count: int = 0
    """Every problem found, listed or not."""

    @property
    def ok(self) -> bool:
        """Nothing was found wrong."""
        return self.problem_count == 0


def verify(
    store: EventStore, app: App | None = None, *, progress: Callable[[int], None] | None = None
) -> Verification:
    """Check the whole log (and, with `app`, its projections' checkpoints).

    `progress` is told the position reached, now and then.
    """
    checkpoints = None if app is None else functools.partial(projection_checkpoints, store, app)
    found = verify_log(store, checkpoints=checkpoints, progress=progress)
    return Verification(
        events=found.events,
        streams=found.streams,
        high_water_mark=found.high_water_mark,
        low_water_mark=found.low_water_mark,
        snapshots=found.snapshots,
        projections=found.checkpoints,
        problems=found.problems,
        problem_count=found.problem_count,
    )


def projection_checkpoints(store: EventStore, app: App) -> dict[str, int]:
    """The position of each of the App's projections that has a checkpoint."""
    if not app.projections:
        return {}
    from eventcraft.projections import Database, checkpoint_positions

    database = Database.of(app.database, store)
    try:
        # None: no projection has run against this database yet.
        return checkpoint_positions(database, [d.name for d in app.projections]) or {}
    finally:
        database.close()  # a memory store's database stays open with the store
