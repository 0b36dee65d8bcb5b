"""Orchestrator processes for the crash tests (spawned: module-level functions only)."""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from eventstore import ANY, AppendResult, EventStore, ExpectedVersion, NewEvent
from sagas import Orchestrator

from .services import flaky_fulfilment, fulfilment


class CrashingStore:
    """The store, but the process dies (SIGKILL) right after its `crash_after`-th saga append."""

    def __init__(self, store: EventStore, crash_after: int) -> None:
        self.store = store
        self.crash_after = crash_after
        self.appends = 0

    def append(
        self, stream_id: str, events: Sequence[NewEvent], expected_version: ExpectedVersion = ANY
    ) -> AppendResult:
        result = self.store.append(stream_id, events, expected_version=expected_version)
        if stream_id.startswith("saga-"):
            self.appends += 1
            if self.appends == self.crash_after:
                os.kill(os.getpid(), signal.SIGKILL)
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def run_and_crash(
    url: str, ledger: str, fail: str | None, crash_after: int, crash_in: str | None
) -> None:
    """Start order 1 and run it; die after the `crash_after`-th transition (0: never),
    or inside the action or compensation named `crash_in`, after its effect."""
    with EventStore.open(url) as opened:
        store = cast(EventStore, CrashingStore(opened, crash_after))

        saga = fulfilment(Path(ledger), fail=fail, crash_in=crash_in)
        orchestrator = Orchestrator(store, [saga], lease=5.0)
        orchestrator.start(saga, {"order": "1"}, saga_id="1")
        orchestrator.run_pending()


def orchestrate_until_settled(url: str, ledger: str, calls: str, ready: Any) -> None:
    """Run every pending saga, with another process doing the same, until none is left."""
    with EventStore.open(url) as store:
        orchestrator = Orchestrator(store, [flaky_fulfilment(Path(ledger), Path(calls))])
        ready.wait()
        while any(not (s.finished or s.status == "parked") for s in orchestrator.instances()):
            orchestrator.run_pending()


def run_until_hung(url: str, ledger: str, hang_in: str, timeout: float) -> None:
    """Run order 1 with steps of `timeout` seconds; the step `hang_in` never returns."""
    with EventStore.open(url) as store:
        saga = fulfilment(Path(ledger), hang_in=hang_in, timeout=timeout)
        orchestrator = Orchestrator(store, [saga])
        orchestrator.start(saga, {"order": "1"}, saga_id="1")
        orchestrator.run_pending()
