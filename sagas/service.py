"""An orchestrator's service loop: it outlives outages of the store, and says so.

When the database goes away (a restart, a failover, a network cut) every
store call raises `StoreUnavailable`. The loop does not end there: it logs,
waits (0.1 s, doubled after each failed pass, at most `MAX_BACKOFF`) and
tries again, and its status says it is waiting for the store until a pass
goes through. Nothing else needs restoring: every pass reloads what it acts
on from the store, and a move whose append was cut off is either in the
stream (the next append, expecting the old version, then reloads) or not
(the try is taken up again, with the same idempotency key).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

from eventcraft.eventstore import StoreUnavailable

from . import telemetry
from .errors import EventLoopRunning

log = logging.getLogger("eventcraft.sagas")

FIRST_BACKOFF = 0.1
"""Seconds before the first retry of a failed pass."""
MAX_BACKOFF = 5.0
"""The longest wait between passes that fail: after an outage, the loop is back within it."""

LoopState = Literal["stopped", "running", "waiting for the store", "failing"]


@dataclass(frozen=True)
class OrchestratorStatus:
    """What an orchestrator's `run()` loop is doing; read without touching the store.

    Example::

        import threading

        from eventcraft.eventstore import EventStore
        from eventcraft.sagas import Orchestrator, Saga, Step

        stop = threading.Event()

        def ship(data, context):
            stop.set()  # a service sets it on SIGTERM; here the one step does

        fulfilment = Saga("fulfilment", [Step("ship", ship)])
        store = EventStore.open("sqlite:///shop.db")
        orchestrator = Orchestrator(store, [fulfilment])
        assert orchestrator.status().state == "stopped"  # no run() loop yet
        orchestrator.start(fulfilment, {"sku": "tea"}, saga_id="order-1")
        orchestrator.run(stop)  # a service's main loop: returns once stop is set
        status = orchestrator.status()
        assert (status.state, status.unfinished, status.outages) == ("stopped", 0, 0)
        assert status.owner == orchestrator.owner and status.last_pass is not None
        assert str(status) == "stopped; 0 unfinished after the last pass"
        store.close()
    """

    owner: str
    """The orchestrator's owner name, as its leases record it."""
    state: LoopState = "stopped"
    """stopped (no `run()` loop), running, waiting for the store (it raised
    `StoreUnavailable`), or failing (another error; logged, and retried alike)."""
    error: str | None = None
    """While waiting or failing: the last error, as raised."""
    since: float | None = None
    """While waiting or failing: when the first failed pass of this spell ended (time.time())."""
    retry_in: float | None = None
    """While waiting or failing: the back-off before the next pass, in seconds."""
    unfinished: int | None = None
    """Instances the last pass that went through left unfinished."""
    last_pass: float | None = None
    """When the last pass that went through ended (time.time())."""
    outages: int = 0
    """Spells of waiting for the store since the orchestrator was made."""

    @property
    def waiting_for_store(self) -> bool:
        return self.state == "waiting for the store"

    def __str__(self) -> str:
        if self.state in ("waiting for the store", "failing"):
            down = time.time() - (self.since or time.time())
            return f"{self.state} for {down:.1f} s ({self.error}); next try in {self.retry_in} s"
        return f"{self.state}; {self.unfinished} unfinished after the last pass"


class StatusBoard:
    """The loop's status: written by the loop's thread only, read by any.

    A reader gets a whole frozen `OrchestratorStatus` (replacing the
    attribute is atomic), so no lock is needed.
    """

    def __init__(self, owner: str) -> None:
        self.status = OrchestratorStatus(owner)


def keep_running(
    run_pending: Callable[[], int],
    stop: threading.Event,
    poll: float,
    board: StatusBoard,
) -> None:
    """Call `run_pending` every `poll` seconds until `stop` is set, through failures."""
    delay = FIRST_BACKOFF
    board.status = replace(board.status, state="running")
    try:
        while not stop.is_set():
            try:
                unfinished = run_pending()
            except EventLoopRunning:
                raise  # the caller's mistake: no wait mends it
            except StoreUnavailable as error:
                _failed(board, "waiting for the store", error, delay)
            except Exception as error:
                # A bug, or a refusal the store should not have made: logged with its
                # traceback, and the loop goes on, so that the other sagas still move.
                log.error(
                    "an orchestrator pass failed; trying again in %.1f s: %s",
                    delay,
                    telemetry.traced(error),
                )
                _failed(board, "failing", error, delay)
            else:
                _passed(board, unfinished)
                delay = FIRST_BACKOFF
                stop.wait(poll)
                continue
            stop.wait(delay)
            delay = min(delay * 2, MAX_BACKOFF)
    finally:
        board.status = replace(board.status, state="stopped", retry_in=None)


def _passed(board: StatusBoard, unfinished: int) -> None:
    before = board.status
    board.status = replace(
        before,
        state="running",
        error=None,
        since=None,
        retry_in=None,
        unfinished=unfinished,
        last_pass=time.time(),
    )
    if before.since is not None:
        down = time.time() - before.since
        log.warning("orchestrator %s carries on after %.1f s %s", before.owner, down, before.state)


def _failed(board: StatusBoard, state: LoopState, error: Exception, delay: float) -> None:
    before = board.status
    spell = before.state == state  # the same trouble as the last pass: one spell
    waiting = state == "waiting for the store"
    board.status = replace(
        before,
        state=state,
        error=str(error),
        since=before.since if spell and before.since is not None else time.time(),
        retry_in=delay,
        outages=before.outages + (waiting and not spell),
    )
    if waiting and not spell:
        log.warning("orchestrator %s is waiting for the store: %s", before.owner, error)
    elif waiting:
        log.info("the store is still unavailable; trying again in %.1f s", delay)
