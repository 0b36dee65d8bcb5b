"""Projector processes for the concurrency tests (spawned: module-level functions only)."""

from __future__ import annotations

from typing import Any

from eventcraft.eventstore import EventStore
from eventcraft.projections import ProjectionRunner

from . import models


def project_until_killed(url: str, trap_at: int, marker: str, batch_size: int) -> None:
    """Follow the log; the audit handler hangs at `trap_at`, mid-batch, to be killed there.

    The lease is short: the killed predecessor's lapses soon, and this one takes over.
    """
    models.TRAP.update(position=trap_at, marker=marker)
    with (
        EventStore.open(url) as store,
        ProjectionRunner(
            store, [models.audit, models.balances], batch_size=batch_size, lease_ttl=1.0
        ) as runner,
    ):
        runner.start()
        runner.wait_until(store.high_water_mark(), timeout=120)


def project_until(
    url: str, position: int, lease_ttl: float | None, barrier: Any, trap_at: int, marker: str
) -> None:
    """Follow the log until both projections have reached `position`; the first of the
    workers to apply `trap_at` hangs there, to be killed."""
    models.TRAP.update(position=trap_at, marker=marker)
    with (
        EventStore.open(url) as store,
        ProjectionRunner(
            store, [models.audit, models.balances], batch_size=3, lease_ttl=lease_ttl
        ) as runner,
    ):
        barrier.wait()
        runner.start()
        runner.wait_until(position, timeout=120)
