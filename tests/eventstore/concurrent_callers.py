"""Callers on threads of their own against one store while a reader tails its log: what the
model tests (`test_group_commit_model.py`, `test_dcb_model.py`) share."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable

import pytest
from eventcraft.eventstore import EventStore


def new_store_url(
    backend: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> str:
    """A URL of a new, empty store on `backend`, for one hypothesis example (`store_url`
    and `pg_url` are made once per test, not per example)."""
    if backend == "memory":
        return "memory://"
    if backend == "sqlite":
        return f"sqlite:///{tmp_path_factory.mktemp('model') / 'events.db'}"
    import psycopg

    from ..conftest import PG_URL, _need_postgres

    _need_postgres()
    schema = f"t_{uuid.uuid4().hex[:12]}"

    def drop() -> None:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")

    request.addfinalizer(drop)
    return f"{PG_URL}?schema={schema}"


def run_callers(store: EventStore, callers: int, call: Callable[[int], None]) -> list[uuid.UUID]:
    """`call(n)` for each of `callers` callers, each on a thread, started together, while a
    reader tails the log; the ids the reader saw, in order. A caller's error fails the run."""
    start = threading.Barrier(callers)
    done = threading.Event()
    seen: list[uuid.UUID] = []
    failures: list[BaseException] = []

    def caller(n: int) -> None:
        start.wait()
        try:
            call(n)
        except BaseException as error:
            failures.append(error)

    reader = threading.Thread(target=_tail, args=(store, done, seen))
    reader.start()
    threads = [threading.Thread(target=caller, args=(n,)) for n in range(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    done.set()
    reader.join()
    assert failures == []
    return seen


def _tail(store: EventStore, done: threading.Event, seen: list[uuid.UUID]) -> None:
    last = 0
    while True:
        finished = done.is_set()  # read before the last look: nothing is missed after it
        for event in store.read_all(after=last):
            seen.append(event.id)
            last = event.position
        if finished:
            return
        store.wait_for_events(after=last, timeout=0.2)
