"""`Orchestrator.run()` outlives a failing store in-process: its status says why it waits,
and it carries on when the store is back (test_outages.py does it to a real PostgreSQL)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest
from eventcraft.eventstore import EventStore, RecordedEvent, StoreUnavailable
from eventcraft.sagas import Orchestrator, OrchestratorStatus, Saga, Step
from eventcraft.sagas.service import MAX_BACKOFF


class BreakableStore:
    """The store, but every read of the log raises `error` while `broken` is set."""

    def __init__(self, store: EventStore, error: Exception) -> None:
        self.store = store
        self.error = error
        self.broken = threading.Event()

    def read_all(self, *args: Any, **kwargs: Any) -> Iterator[RecordedEvent]:
        if self.broken.is_set():
            raise self.error
        return self.store.read_all(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def _wait_for(condition: Callable[[], bool], what: str, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"never {what}"
        time.sleep(0.005)


@pytest.mark.parametrize(
    ("error", "state"),
    [
        (StoreUnavailable("cannot connect to PostgreSQL"), "waiting for the store"),
        (RuntimeError("a bug"), "failing"),
    ],
)
def test_run_backs_off_while_the_store_fails_says_so_and_carries_on(
    store: EventStore, error: Exception, state: str
) -> None:
    breakable = BreakableStore(store, error)
    saga = Saga("tiny", [Step("one", lambda d, c: c.attempt)])
    orchestrator = Orchestrator(cast(EventStore, breakable), [saga])
    assert orchestrator.status().state == "stopped"
    breakable.broken.set()
    stop = threading.Event()
    loop = threading.Thread(target=orchestrator.run, args=(stop,), kwargs={"poll": 0.01})
    loop.start()
    try:
        _wait_for(lambda: (orchestrator.status().retry_in or 0) >= 0.4, "backed off")
        waiting: OrchestratorStatus = orchestrator.status()
        assert waiting.state == state and waiting.error == str(error)
        assert str(waiting).startswith(f"{state} for ")
        assert waiting.outages == (state == "waiting for the store")
        orchestrator.start(saga, {}, saga_id="1")  # appends still work: only reads fail
        breakable.broken.clear()
        _wait_for(lambda: orchestrator.status().unfinished == 0, "carried on", MAX_BACKOFF + 20)
        back = orchestrator.status()
        assert back.state == "running" and back.error is None and back.since is None
        assert orchestrator.state("tiny", "1").status == "completed"
    finally:
        stop.set()
        loop.join(10)
    assert not loop.is_alive() and orchestrator.status().state == "stopped"
