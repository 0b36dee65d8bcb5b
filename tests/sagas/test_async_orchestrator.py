"""The async orchestrator on every backend: coroutine steps awaited on the caller's loop,
plain ones in a worker thread, run() a task on that loop, request() awaited."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
from eventcraft.domain import caused_by
from eventcraft.eventstore import AsyncEventStore, NewEvent
from eventcraft.sagas import (
    AsyncOrchestrator,
    ReplyTimeout,
    Saga,
    Step,
    StepContext,
    request_async,
)

T = TypeVar("T")


def run(test: Callable[[AsyncEventStore], Awaitable[T]], url: str) -> T:
    async def main() -> T:
        async with await AsyncEventStore.open(url) as store:
            return await asyncio.wait_for(test(store), 60)

    return asyncio.run(main())


async def finished(orchestrator: AsyncOrchestrator, name: str, saga_id: str) -> str:
    """The instance's status once it has finished; polled, bounded by the test's deadline."""
    while True:
        state = await orchestrator.state(name, saga_id)
        if state.finished:
            return state.status
        await asyncio.sleep(0.01)


def test_coroutine_steps_run_on_the_callers_loop_and_plain_ones_in_a_thread(
    store_url: str,
) -> None:
    async def test(store: AsyncEventStore) -> None:
        loop = asyncio.get_running_loop()
        loop_thread = threading.get_ident()
        seen: dict[str, bool] = {}

        async def reserve(data: dict[str, Any], context: StepContext) -> str:
            await asyncio.sleep(0)
            seen["reserve on the loop"] = asyncio.get_running_loop() is loop
            return f"reserved {data['order']}"

        def invoice(data: dict[str, Any], context: StepContext) -> str:
            seen["invoice off the loop"] = threading.get_ident() != loop_thread
            return "invoiced"

        saga = Saga("async_checkout", [Step("reserve", reserve), Step("invoice", invoice)])
        orchestrator = await AsyncOrchestrator.open(store, [saga])
        await orchestrator.start(saga, {"order": "42"}, saga_id="42")
        running = asyncio.create_task(orchestrator.run(poll=0.02))
        assert await finished(orchestrator, "async_checkout", "42") == "completed"
        assert seen == {"reserve on the loop": True, "invoice off the loop": True}
        state = await orchestrator.state("async_checkout", "42")
        assert state.results == {"reserve": "reserved 42", "invoice": "invoiced"}
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        assert orchestrator.status().state == "stopped"

    run(test, store_url)


def test_a_failing_step_is_compensated_by_coroutines_on_the_loop(store_url: str) -> None:
    async def test(store: AsyncEventStore) -> None:
        undone: list[str] = []

        async def reserve(data: dict[str, Any], context: StepContext) -> str:
            return "reserved"

        async def release(data: dict[str, Any], context: StepContext) -> None:
            await asyncio.sleep(0)
            undone.append("release")

        async def charge(data: dict[str, Any], context: StepContext) -> None:
            raise RuntimeError("card declined")

        saga = Saga(
            "async_refund",
            [Step("reserve", reserve, release), Step("charge", charge, fails_on=(RuntimeError,))],
        )
        orchestrator = await AsyncOrchestrator.open(store, [saga])
        await orchestrator.start(saga, {}, saga_id="1")
        assert await orchestrator.run_pending() == 0
        state = await orchestrator.state("async_refund", "1")
        assert state.status == "compensated" and "card declined" in (state.failure or "")
        assert undone == ["release"]

    run(test, store_url)


def test_a_coroutine_step_past_its_timeout_is_cancelled_and_compensated(
    store_url: str,
) -> None:
    async def test(store: AsyncEventStore) -> None:
        cancelled = asyncio.Event()

        async def slow(data: dict[str, Any], context: StepContext) -> None:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                cancelled.set()
                raise

        saga = Saga("async_slow", [Step("slow", slow, lambda d, c: None, timeout=0.2)])
        orchestrator = await AsyncOrchestrator.open(store, [saga])
        await orchestrator.start(saga, {}, saga_id="1")
        await orchestrator.run_pending()
        state = await orchestrator.state("async_slow", "1")
        assert state.status == "compensated" and "past its timeout" in (state.failure or "")
        await asyncio.wait_for(cancelled.wait(), 5)

    run(test, store_url)


def test_a_coroutine_step_cut_short_by_the_sagas_timeout_is_cancelled_before_compensation(
    store_url: str,
) -> None:
    """The saga's deadline comes before the step's own timeout (it has none): the try is
    cancelled on the loop, as the sync orchestrator cancels it, before it is undone."""

    async def test(store: AsyncEventStore) -> None:
        happened: list[str] = []

        async def book(data: dict[str, Any], context: StepContext) -> None:
            try:
                await asyncio.Event().wait()  # a booking service that never answers
            except asyncio.CancelledError:
                happened.append("cancelled")
                raise
            happened.append("booked")

        def unbook(data: dict[str, Any], context: StepContext) -> None:
            happened.append("unbooked")

        saga = Saga("async_trip", [Step("book", book, unbook)], timeout=0.2)
        orchestrator = await AsyncOrchestrator.open(store, [saga])
        await orchestrator.start(saga, {}, saga_id="1")
        await orchestrator.run_pending()
        state = await orchestrator.state("async_trip", "1")
        assert state.status == "compensated" and state.unknown == ["book"]
        assert happened == ["cancelled", "unbooked"]

    run(test, store_url)


def test_a_request_awaits_the_event_that_answers_it(store_url: str) -> None:
    async def test(store: AsyncEventStore) -> None:
        async def payments() -> None:
            async for event in store.subscribe(types="Charge"):
                with caused_by(event) as context:
                    metadata = context.metadata()
                await store.append(
                    "payment-1", [NewEvent("Charged", {"cents": event.data["cents"]}, metadata)]
                )

        responder = asyncio.create_task(payments())
        await store.append("payment-1", [NewEvent("Charged", {"cents": 1})])  # someone else's
        command = NewEvent("Charge", {"cents": 1600})
        reply = await request_async(
            store, "payment-1", command, reply_types=["Charged"], timeout=30
        )
        assert reply.data == {"cents": 1600}
        assert reply.metadata["causation_id"] == str(command.id)
        responder.cancel()
        unanswered = NewEvent("Refund", {"id": uuid.uuid4().hex})
        with pytest.raises(ReplyTimeout):
            await request_async(
                store, "payment-1", unanswered, reply_types=["Refunded"], timeout=0.2
            )

    run(test, store_url)
