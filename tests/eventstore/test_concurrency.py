"""Real processes against real SQLite files and a real PostgreSQL server, each through
the sync API and through the async one (behind `BlockingEventStore`)."""

from __future__ import annotations

import uuid
from concurrent.futures import ProcessPoolExecutor

import pytest
from eventcraft.eventstore import EventStore

from ..processes import PROCESSES
from . import workers
from .tailing import tail_until_written


@pytest.fixture(params=["sync", "async"])
def api(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.parametrize(("size", "rounds"), [(1, 15), (700, 5)], ids=["one", "large"])
def test_racing_writers_with_the_same_expected_version_have_one_winner(
    shared_store_url: str, size: int, rounds: int, api: str
) -> None:
    processes = 4
    EventStore.open(shared_store_url).close()  # create the schema before the race
    with (
        PROCESSES.Manager() as manager,
        ProcessPoolExecutor(processes, mp_context=PROCESSES) as pool,
    ):
        barrier = manager.Barrier(processes)
        futures = [
            pool.submit(workers.race, shared_store_url, "raced-1", rounds, barrier, size, api)
            for _ in range(processes)
        ]
        outcomes = [future.result(timeout=120) for future in futures]
    winners_per_round = [sum(o[r] for o in outcomes) for r in range(rounds)]
    assert winners_per_round == [1] * rounds
    with EventStore.open(shared_store_url) as store:
        stored = list(store.read_stream("raced-1"))
        assert [e.version for e in stored] == list(range(1, rounds * size + 1))
        # Each round's events are one winner's batch, whole and in its order.
        assert [e.data["i"] for e in stored] == list(range(size)) * rounds
        assert len(set(e.id for e in stored)) == len(stored)


@pytest.mark.slow
def test_a_tailing_reader_sees_every_committed_event_once_in_order(
    shared_store_url: str, api: str
) -> None:
    writers, appends = 4, 150
    with (
        workers.opened(shared_store_url, api) as store,
        ProcessPoolExecutor(writers, mp_context=PROCESSES) as pool,
    ):
        futures = [
            pool.submit(workers.write_mix, shared_store_url, w, appends, seed=w, api=api)
            for w in range(writers)
        ]
        tail_until_written(store, futures)


def test_a_retry_from_another_process_after_a_commit_writes_nothing(
    shared_store_url: str, api: str
) -> None:
    ids = [str(uuid.uuid4()) for _ in range(3)]
    with ProcessPoolExecutor(1, mp_context=PROCESSES) as pool:
        first = pool.submit(
            workers.append_then_report, shared_store_url, "order-1", ids, api
        ).result()
    # The first process is gone, as a crashed client would be; a new one resends.
    with ProcessPoolExecutor(1, mp_context=PROCESSES) as pool:
        again = pool.submit(
            workers.append_then_report, shared_store_url, "order-1", ids, api
        ).result()
    assert again == first
    with EventStore.open(shared_store_url) as store:
        assert [str(e.id) for e in store.read_all()] == ids
