"""The database goes away under a running orchestrator: its `run()` loop waits for the
store, says so in its status, and finishes every saga once the store is back, each service's
effect applied once."""

from __future__ import annotations

import json
import queue
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from eventcraft.eventstore import EventStore
from eventcraft.sagas import Orchestrator

from ..postgres_server import postgres_server
from ..processes import PROCESSES
from .services import Ledger, gated_fulfilment
from .workers import orchestrate_through_outages

SAGAS = 40
HELD = "20"  # its charge is under way when the database goes


def _order(n: int) -> dict[str, Any]:
    return {"order": f"{n:02}", "refuse": n % 4 == 3}  # one in four is compensated


def _next_status(statuses: Any, deadline: float) -> dict[str, Any]:
    try:
        status: dict[str, Any] = statuses.get(timeout=max(deadline - time.monotonic(), 0.01))
    except queue.Empty:
        raise AssertionError("the orchestrator's status stopped changing") from None
    assert status["state"] != "ended", f"the worker ended early: {status}"
    # Every failure was the store's absence, none an error that leaked untranslated.
    assert status["state"] != "failing", status
    return status


@pytest.mark.parametrize("outage", ["kill", "immediate"])
@pytest.mark.slow
def test_a_running_orchestrator_waits_out_a_database_restart_and_finishes_every_saga(
    tmp_path: Path, outage: str
) -> None:
    ledger, calls, gate = tmp_path / "ledger", tmp_path / "calls", tmp_path / "gate"
    saga = gated_fulfilment(ledger, calls, gate, HELD)
    with postgres_server() as server:
        with EventStore.open(server.url) as store:
            starter = Orchestrator(store, [saga])
            for n in range(SAGAS):
                starter.start(saga, _order(n), saga_id=f"{n:02}")
        statuses, finish = PROCESSES.Queue(), PROCESSES.Event()
        worker = PROCESSES.Process(
            target=orchestrate_through_outages,
            args=(server.url, str(ledger), str(calls), str(gate), HELD, statuses, finish),
        )
        worker.start()
        try:
            deadline = time.monotonic() + 120
            while not (tmp_path / "held").exists():
                assert worker.is_alive() and time.monotonic() < deadline, "nothing held"
                time.sleep(0.01)
            server.kill() if outage == "kill" else server.stop("immediate")
            went = time.monotonic()
            gate.touch()  # the held charge returns: its outcome cannot be recorded

            deadline = time.monotonic() + 60
            status = _next_status(statuses, deadline)
            # Down long enough for the loop to back off a few times (0.1 + 0.2 + 0.4 s).
            while not (status["state"] == "waiting for the store" and status["retry_in"] >= 0.8):
                status = _next_status(statuses, deadline)
            assert not server.running()
            waiting = status
            assert str(waiting["text"]).startswith("waiting for the store for")
            assert waiting["outages"] == 1 and "PostgreSQL" in waiting["error"]

            server.start()
            back = time.monotonic()
            while not (status["state"] == "running" and status["unfinished"] == 0):
                status = _next_status(statuses, deadline)
            settled = time.monotonic()
        finally:
            finish.set()
            worker.join(60)
        assert worker.exitcode == 0
        with EventStore.open(server.url) as store:
            final = {s.saga_id: s.status for s in Orchestrator(store, [saga]).instances()}

    refused = {f"{n:02}" for n in range(SAGAS) if _order(n)["refuse"]}
    assert final == {
        f"{n:02}": "compensated" if f"{n:02}" in refused else "completed" for n in range(SAGAS)
    }
    effects = []
    for order in final:
        done = ["reserve", "charge", *(["refund", "release"] if order in refused else ["ship"])]
        effects += [f"{name}:{order}" for name in done]
    assert sorted(Ledger(ledger).effects()) == sorted(effects)  # each once
    tries = Counter(json.loads(line)["key"] for line in calls.read_text().splitlines())
    held_charge = f"saga-fulfilment:{HELD}/charge"
    assert tries[held_charge] == 2  # taken up again after the outage, with its key
    said = " ".join(str(waiting["text"]).split())
    print(
        f"\n{outage}: the database was down {back - went:.2f} s ({said}); all {SAGAS} "
        f"sagas settled {settled - back:.2f} s after it came back: {Counter(final.values())}; "
        f"the held charge was called {tries[held_charge]} times, applied once"
    )
