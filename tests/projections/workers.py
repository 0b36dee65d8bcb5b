"""Projector processes for the concurrency tests (spawned: module-level functions only)."""

from __future__ import annotations

import threading
from typing import Any

from eventcraft.eventstore import EventStore, RecordedEvent
from eventcraft.projections import ErrorPolicy, ProjectionRunner, Subscription

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


def retry_until_killed(url: str, name: str, position: int, inside: Any) -> None:
    """Retry the subscriber `name`'s event parked at `position`, with a handler that says
    so on the pipe end `inside` and then hangs, to be killed there.

    The lease, and with it the retry's claim, is short: the test waits it out."""

    def hang(event: RecordedEvent) -> None:
        inside.send(event.position)
        threading.Event().wait()

    subscriber = Subscription(name, hang, on_error=ErrorPolicy(attempts=1, backoff=0, then="skip"))
    with (
        EventStore.open(url) as store,
        ProjectionRunner(store, [subscriber], lease_ttl=1.0) as runner,
    ):
        runner.retry_parked(name, position)
