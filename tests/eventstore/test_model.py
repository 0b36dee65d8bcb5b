"""The store against a model of it: random appends, expected versions and retries."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from eventcraft.eventstore import (
    ANY,
    NO_STREAM,
    AppendResult,
    EventStore,
    NewEvent,
    WrongExpectedVersion,
)
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    rule,
    run_state_machine_as_test,
)

from ..conftest import PG_URL

STREAMS = ["order-1", "order-2", "invoice-1"]


def machine_on(new_url: Callable[[], str]) -> type[RuleBasedStateMachine]:
    class StoreMachine(RuleBasedStateMachine):
        appended = Bundle("appended")

        def __init__(self) -> None:
            super().__init__()
            self.store = EventStore.open(new_url())
            self.streams: dict[str, list[uuid.UUID]] = {s: [] for s in STREAMS}
            self.log: list[tuple[int, uuid.UUID]] = []

        @rule(
            target=appended,
            stream=st.sampled_from(STREAMS),
            size=st.integers(1, 3),
            kind=st.sampled_from(["any", "no-stream", "current", "stale"]),
        )
        def append(
            self, stream: str, size: int, kind: str
        ) -> tuple[str, list[NewEvent], object, AppendResult | None]:
            events = [NewEvent("E", {"n": n}) for n in range(size)]
            current = len(self.streams[stream])
            expected: object = {
                "any": ANY,
                "no-stream": NO_STREAM,
                "current": current,
                "stale": current + 1,
            }[kind]
            succeeds = kind in ("any", "current") or (kind == "no-stream" and current == 0)
            if not succeeds:
                with pytest.raises(WrongExpectedVersion) as caught:
                    self.store.append(stream, events, expected)  # type: ignore[arg-type]
                assert caught.value.actual == current
                return stream, events, expected, None
            result = self.store.append(stream, events, expected)  # type: ignore[arg-type]
            assert result.version == current + size
            last = self.log[-1][0] if self.log else 0
            assert list(result.positions) == sorted(result.positions)
            assert result.positions[0] > last
            self.streams[stream] += [e.id for e in events]
            self.log += zip(result.positions, (e.id for e in events), strict=True)
            return stream, events, expected, result

        @rule(attempt=consumes(appended))
        def retry(self, attempt: tuple[str, list[NewEvent], object, AppendResult | None]) -> None:
            stream, events, expected, result = attempt
            if result is None:
                return
            assert self.store.append(stream, events, expected) == result  # type: ignore[arg-type]

        @invariant()
        def the_log_and_every_stream_match_the_model(self) -> None:
            assert [(e.position, e.id) for e in self.store.read_all()] == self.log
            for stream, ids in self.streams.items():
                assert [e.id for e in self.store.read_stream(stream)] == ids
                assert self.store.stream_version(stream) == len(ids)
            if self.log:
                assert self.store.high_water_mark() == self.log[-1][0]
                middle = self.log[len(self.log) // 2][0]
                tail = [(e.position, e.id) for e in self.store.read_all(after=middle)]
                assert tail == [entry for entry in self.log if entry[0] > middle]

        def teardown(self) -> None:
            self.store.close()

    return StoreMachine


@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres"])
@pytest.mark.slow
def test_the_store_behaves_like_its_model(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    schemas: list[str] = []

    def new_url() -> str:
        if backend == "memory":
            return "memory://"
        if backend == "sqlite":
            return f"sqlite:///{tmp_path / uuid.uuid4().hex}.db"
        schemas.append(f"model_{uuid.uuid4().hex[:12]}")
        return f"{PG_URL}?schema={schemas[-1]}"

    if backend == "postgres":
        request.getfixturevalue("pg_url")  # fails in CI, skips elsewhere, when no server
    examples = {"memory": 60, "sqlite": 25, "postgres": 15}[backend]
    try:
        run_state_machine_as_test(
            machine_on(new_url),
            settings=settings(
                max_examples=examples,
                stateful_step_count=12,
                deadline=None,
                suppress_health_check=list(HealthCheck),
            ),
        )
    finally:
        if schemas:
            with psycopg.connect(PG_URL, autocommit=True) as conn:
                for name in schemas:
                    conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
