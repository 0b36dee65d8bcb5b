"""Partition workers for the competing-consumer tests (spawned: module-level functions)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from eventcraft.eventstore import EventStore, RecordedEvent
from eventcraft.projections import PartitionedRunner, Subscription

from . import models


def handle_partitions(url: str, log_path: str, partitions: int, pause: float, barrier: Any) -> None:
    """Share the partitions of a subscription; log each handled event as a line
    `time_ns stream version`, flushed at once (the process may be killed any moment).

    Starts work at `barrier`, once every worker has joined the group: one started
    much earlier would otherwise finish the log alone."""

    def handle(event: RecordedEvent) -> None:
        if pause:
            time.sleep(pause)
        log.write(f"{time.time_ns()} {event.stream_id} {event.version}\n")

    with (
        Path(log_path).open("a", buffering=1) as log,
        EventStore.open(url) as store,
        PartitionedRunner.for_subscription(
            store,
            Subscription("shipping", handle),
            partitions=partitions,
            batch_size=20,
            lease_ttl=1.0,
        ) as runner,
    ):
        barrier.wait()
        runner.run()


def project_partitions(url: str, trap_at: int, marker: str) -> None:
    """Apply the audit projection in 4 partitions; the first process to reach `trap_at`
    hangs there mid-batch, its transaction open, to be killed."""
    models.TRAP.update(position=trap_at, marker=marker)
    with (
        EventStore.open(url) as store,
        PartitionedRunner.for_projection(
            store, models.audit, partitions=4, batch_size=10, lease_ttl=1.0
        ) as runner,
    ):
        runner.run()
