"""Called from a running event loop, the orchestrator refuses async steps before recording
anything: a limit of the orchestrator is never a saga's failure."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from eventcraft.eventstore import EventStore
from eventcraft.sagas import EventLoopRunning, Orchestrator, Saga, Step, StepContext

done: list[str] = []


async def reserve(data: dict[str, Any], context: StepContext) -> str:
    await asyncio.sleep(0)
    done.append(context.step)
    return "reserved"


SAGA = Saga("async_checkout", [Step("reserve", reserve, lambda d, c: done.append("release"))])
CALLS: dict[str, Callable[[Orchestrator], Any]] = {
    "run_pending": lambda o: o.run_pending(),
    "advance": lambda o: o.advance("async_checkout", "1"),
}


@pytest.mark.parametrize("method", sorted(CALLS))
def test_async_steps_driven_from_a_running_loop_are_refused_and_nothing_is_recorded(
    store: EventStore, method: str
) -> None:
    done.clear()
    orchestrator = Orchestrator(store, [SAGA])
    orchestrator.start(SAGA, {}, saga_id="1")
    before = list(store.read_stream("saga-async_checkout:1"))

    async def service() -> None:
        with pytest.raises(EventLoopRunning, match=r"asyncio\.to_thread\(orchestrator\."):
            CALLS[method](orchestrator)
        assert list(store.read_stream("saga-async_checkout:1")) == before
        assert orchestrator.state("async_checkout", "1").status == "running"
        # What the error says to do works: the same call, in a thread.
        await asyncio.to_thread(CALLS[method], orchestrator)

    asyncio.run(service())
    assert orchestrator.state("async_checkout", "1").status == "completed"
    assert done == ["reserve"]


def test_plain_steps_still_run_from_a_running_loop(store: EventStore) -> None:
    saga = Saga("plain", [Step("note", lambda d, c: c.attempt)])
    orchestrator = Orchestrator(store, [saga])
    orchestrator.start(saga, {}, saga_id="1")

    async def service() -> int:
        return orchestrator.run_pending()

    assert asyncio.run(service()) == 0
    assert orchestrator.state("plain", "1").results == {"note": 1}


def test_a_plain_step_that_returns_an_awaitable_keeps_what_it_resolves_to_under_a_timeout(
    store: EventStore,
) -> None:
    async def work() -> int:
        return 7

    saga = Saga("wrapped", [Step("one", lambda d, c: work(), timeout=5)])
    orchestrator = Orchestrator(store, [saga])
    orchestrator.start(saga, {}, saga_id="1")
    orchestrator.run_pending()
    assert orchestrator.state("wrapped", "1").results == {"one": 7}
