"""Orchestrator processes for the crash tests (spawned: module-level functions only)."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, cast

from eventcraft.eventstore import ANY, AppendResult, EventStore, ExpectedVersion, NewEvent
from eventcraft.sagas import Orchestrator

from .services import flaky_fulfilment, fulfilment, gated_fulfilment


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


def orchestrate_until_settled(url: str, ledger: str, calls: str, ready: Any) -> None:
    """Run every pending saga, with another process doing the same, until none is left."""
    with EventStore.open(url) as store:
        orchestrator = Orchestrator(store, [flaky_fulfilment(Path(ledger), Path(calls))])
        ready.wait()
        while any(not (s.finished or s.status == "parked") for s in orchestrator.instances()):
            orchestrator.run_pending()


def run_until_hung(url: str, ledger: str, hang_in: str, timeout: float, attempts: int) -> None:
    """Run order 1 with steps of `timeout` seconds; the step `hang_in` never returns."""
    with EventStore.open(url) as store:
        saga = fulfilment(Path(ledger), hang_in=hang_in, timeout=timeout, attempts=attempts)
        orchestrator = Orchestrator(store, [saga])
        orchestrator.start(saga, {"order": "1"}, saga_id="1")
        orchestrator.run_pending()


def use_journals(directory: Path, *, shipping_fails: bool) -> None:
    """Point the example's fake services at journals in `directory` (effects outlive us)."""
    from examples import fulfilment

    fulfilment.reset_services(journals=directory)
    if shipping_fails:
        fulfilment.shipping.refuse = "book"  # the courier refuses, every time


def run_example_and_crash(
    url: str, directory: str, shipping_fails: bool, crash_after: int, crash_on: str | None
) -> None:
    """Run the example's order fulfilment for order 1; die after the `crash_after`-th
    transition, or inside the service operation `crash_on` ("payments.refund") after it
    took effect."""
    from examples import fulfilment

    use_journals(Path(directory), shipping_fails=shipping_fails)
    if crash_on is not None:
        service, operation = crash_on.split(".")
        getattr(fulfilment, service).crash_on = operation
    order = {"sku": "book-1", "qty": 1, "cents": 900, "address": "1 Main St"}
    with EventStore.open(url) as opened:
        store = cast(EventStore, CrashingStore(opened, crash_after))
        orchestrator = Orchestrator(store, [fulfilment.order_fulfilment])
        orchestrator.start(fulfilment.order_fulfilment, order, saga_id="1")
        orchestrator.run_pending()


def orchestrate_through_outages(
    url: str, ledger: str, calls: str, gate: str, held: str, statuses: Any, finish: Any
) -> None:
    """Run `Orchestrator.run()` in a thread; put each change of its status on `statuses`
    until `finish` is set."""
    saga = gated_fulfilment(Path(ledger), Path(calls), Path(gate), held)
    with EventStore.open(url) as store:
        orchestrator = Orchestrator(store, [saga])
        stop = threading.Event()
        loop = threading.Thread(target=orchestrator.run, args=(stop,), kwargs={"poll": 0.05})
        loop.start()
        reported = None
        while not finish.wait(0.01):
            status = orchestrator.status()
            if (status.state, status.unfinished, status.retry_in) != reported:
                reported = (status.state, status.unfinished, status.retry_in)
                statuses.put({**asdict(status), "text": str(status)})
        stop.set()
        loop.join(30)
        statuses.put({"state": "ended", "loop_alive": loop.is_alive()})
