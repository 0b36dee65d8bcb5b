"""Sixteen processes enrol 200 students into 20 courses of 5 seats at once on PostgreSQL,
each decision read → decide → conditional append, decided again when its condition
fails: no course ends over capacity, no student over their limit, every acknowledged
append is stored once, and a reader tailing the log meanwhile sees every event once, in
order. `EVENTCRAFT_DCB_RUNS` sets how many races each API runs (the issue's 20 are run
by `benchmarks/dcb_race.py`)."""

from __future__ import annotations

import os
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

import psycopg
import pytest
from eventcraft.eventstore import EventStore

from ..conftest import PG_URL, _need_postgres
from ..processes import PROCESSES
from . import dcb_workers
from .tailing import tail_until_written

WRITERS = 16
ATTEMPTS = 40
RUNS = int(os.environ.get("EVENTCRAFT_DCB_RUNS", "1"))


class _Ids:
    """A writer's future as `tail_until_written` reads it: done, and the ids it wrote."""

    def __init__(self, future: Future[dcb_workers.Enrolled]) -> None:
        self._future = future

    def done(self) -> bool:
        return self._future.done()

    def result(self) -> list[str]:
        return self._future.result().ids


@pytest.fixture(scope="module")
def pool() -> Iterator[tuple[ProcessPoolExecutor, Any]]:
    _need_postgres()
    with PROCESSES.Manager() as manager, ProcessPoolExecutor(WRITERS, mp_context=PROCESSES) as pool:
        yield pool, manager


@pytest.mark.parametrize("api", ["sync", "async"])
def test_racing_enrolments_break_no_rule(pool: tuple[ProcessPoolExecutor, Any], api: str) -> None:
    executor, manager = pool
    for run in range(RUNS):
        schema = f"t_dcb_{uuid.uuid4().hex[:10]}"
        url = f"{PG_URL}?schema={schema}"
        try:
            with EventStore.open(url) as store:
                barrier = manager.Barrier(WRITERS)
                futures = [
                    executor.submit(
                        dcb_workers.enrol, url, w, ATTEMPTS, run * 1000 + w, barrier, api
                    )
                    for w in range(WRITERS)
                ]
                tail_until_written(store, [_Ids(f) for f in futures])  # type: ignore[misc]
                outcomes = [f.result() for f in futures]
                assert dcb_workers.violations(store) == []
                acknowledged = [i for o in outcomes for i in o.ids]
                stored = Counter(str(e.id) for e in store.read_all(types=[dcb_workers.SUBSCRIBED]))
                assert set(stored) == set(acknowledged)
                assert set(stored.values()) == {1}
                # The race was real: decisions met each other's events, and were decided again.
                assert sum(o.conflicts for o in outcomes) > 0
                assert sum(o.gave_up for o in outcomes) == 0
        finally:
            with psycopg.connect(PG_URL, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
