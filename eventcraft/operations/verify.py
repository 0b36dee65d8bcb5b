"""Verify a store: the store's check of its log (`verify_log`: versions, positions, ids,
snapshots, and what retention removed), and with the service's `App`, that no
projection's checkpoint is past the high-water mark.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

from eventcraft.eventstore import EventStore, LogVerification, verify_log

if TYPE_CHECKING:
    from eventcraft.app import App


def verify(
    store: EventStore, app: App | None = None, *, progress: Callable[[int], None] | None = None
) -> LogVerification:
    """Check the whole log (and, with `app`, its projections' checkpoints: the result's
    `checkpoints` counts them, None without an App).

    `progress` is told the position reached, now and then.
    """
    checkpoints = None if app is None else functools.partial(projection_checkpoints, store, app)
    return verify_log(store, checkpoints=checkpoints, progress=progress)


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
