"""Two orchestrator processes share 100 sagas: each ends once, and no step runs twice."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from eventcraft.eventstore import EventStore
from eventcraft.sagas import Orchestrator

from ..processes import PROCESSES
from .services import flaky_fulfilment
from .workers import orchestrate_until_settled

SAGAS = 100


@pytest.mark.slow
def test_two_orchestrators_settle_100_sagas_and_run_no_step_twice(
    shared_store_url: str, tmp_path: Path
) -> None:
    ledger, calls = tmp_path / "ledger", tmp_path / "calls"
    saga = flaky_fulfilment(ledger, calls)
    with EventStore.open(shared_store_url) as store:
        starter = Orchestrator(store, [saga])
        for n in range(SAGAS):
            starter.start(saga, {"order": str(n)}, saga_id=str(n))
        ready = PROCESSES.Event()
        workers = [
            PROCESSES.Process(
                target=orchestrate_until_settled,
                args=(shared_store_url, str(ledger), str(calls), ready),
            )
            for _ in range(2)
        ]
        for worker in workers:
            worker.start()
        ready.set()
        for worker in workers:
            worker.join(300)
        assert [w.exitcode for w in workers] == [0, 0]

        states = {s.saga_id: s for s in starter.instances()}
        statuses = Counter(s.status for s in states.values())
        assert set(statuses) <= {"completed", "compensated", "parked"}
        assert sum(statuses.values()) == SAGAS
        assert all(statuses[s] > 0 for s in ("completed", "compensated", "parked")), statuses
        logged = [json.loads(line) for line in calls.read_text().splitlines()]
        # Every try recorded in a stream ran once, and nothing ran unrecorded.
        ran = Counter((c["key"], c["try"]) for c in logged)
        assert max(ran.values()) == 1
        recorded: Counter[tuple[str, int]] = Counter()
        for state in states.values():
            for event in store.read_stream(state.stream_id):
                if event.type in ("StepStarted", "CompensationStarted"):
                    suffix = "/compensation" if event.type == "CompensationStarted" else ""
                    key = f"{state.stream_id}/{event.data['step']}{suffix}"
                    recorded[(key, event.data["attempt"])] += 1
        assert recorded == ran
        assert len({c["pid"] for c in logged}) == 2, "both orchestrators should have worked"
