"""For any history, following in random batches with restarts gives what a rebuild gives.

The model is the fold itself, run over the whole history in memory: the
incremental runner, restarted between random slices of the history with
random batch sizes, and the blue/green rebuild must both end with exactly
its rows, and the audit must hold every position once.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from eventcraft.eventstore import EventStore, NewEvent
from eventcraft.projections import ProjectionRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ..conftest import PG_URL
from .models import applied_table, audit, balances, balances_table, rows

events = st.lists(
    st.tuples(
        st.sampled_from(["account-1", "account-2", "account-3", "other-1"]),
        st.sampled_from(["Deposited", "Withdrawn", "Opened", "Unrelated"]),
        st.integers(1, 1000),
    ),
    max_size=40,
)
runs = st.lists(st.tuples(st.integers(1, 7), st.integers(0, 15)), min_size=1, max_size=5)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def fresh_store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """Opens a new, empty store per hypothesis example."""
    if request.param == "postgres":
        request.getfixturevalue("pg_url")  # skips, or fails in CI, without a server

    @contextmanager
    def opened() -> Iterator[EventStore]:
        name = uuid.uuid4().hex[:12]
        url = {
            "memory": "memory://",
            "sqlite": f"sqlite:///{tmp_path / name}.db",
            "postgres": f"{PG_URL}?schema=m_{name}",
        }[request.param]
        try:
            with EventStore.open(url) as store:
                yield store
        finally:
            if request.param == "postgres":
                with psycopg.connect(PG_URL, autocommit=True) as conn:
                    conn.execute(f"DROP SCHEMA IF EXISTS m_{name} CASCADE")

    return opened


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(history=events, slices=runs)
@pytest.mark.slow
def test_incremental_with_restarts_equals_rebuild_equals_the_fold(
    fresh_store: Any, history: list[tuple[str, str, int]], slices: list[tuple[int, int]]
) -> None:
    with fresh_store() as store:
        pending = list(history)
        for batch_size, count in [*slices, (3, len(history))]:
            for stream, kind, amount in pending[:count]:
                store.append(stream, [NewEvent(kind, {"amount": amount})])
            del pending[:count]
            # A new runner each time: a restart from the checkpoints alone.
            with ProjectionRunner(store, [balances, audit], batch_size=batch_size) as runner:
                runner.catch_up()
        with ProjectionRunner(store, [balances, audit]) as runner:
            with runner.database.reading() as connection:
                incremental = rows(connection, balances_table)
                applied = Counter(row[0] for row in rows(connection, applied_table))
            runner.rebuild("balances")
            with runner.database.reading() as connection:
                rebuilt = rows(connection, balances_table)
        states: dict[Any, Any] = {}
        balances.fold(states, store.read_all(types=balances.types))
        model = sorted(
            tuple(row[c.name] for c in balances_table.columns) for row in balances.rows(states)
        )
        audited = [e.position for e in store.read_all(types=audit.types)]
    assert incremental == rebuilt == model
    assert sorted(applied) == audited and set(applied.values()) <= {1}
