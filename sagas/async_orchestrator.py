"""`AsyncOrchestrator`: sagas run from a service's event loop, over an `AsyncEventStore`.

The orchestrator is `Orchestrator`, whole: journal, leases, retries,
deadlines, compensation and the outage-proof service loop. What changes is
where the steps run:

- a coroutine action or compensation is awaited on the caller's loop (the
  loop that opened the orchestrator), within the try's cut-off (the step's
  timeout, or the saga's deadline if sooner); its try is cancelled when the
  cut-off passes, as the sync orchestrator cancels it (`calls.OnLoop`);
- a plain one runs in a worker thread, as the passes do, so a blocking
  step never stalls the loop;
- the store is the caller's async store, its calls made on that loop.

`run()` is a coroutine to run as a task (cancel it to stop); the other
methods are awaited. `request()` sends a command and awaits its reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from eventcraft.eventstore import (
    ANY,
    AsyncEventStore,
    BlockingEventStore,
    EventStore,
    NewEvent,
    RecordedEvent,
)
from pydantic import BaseModel

from .calls import OnLoop, is_async
from .definition import Action, Saga
from .errors import ReplyTimeout
from .orchestrator import Orchestrator
from .request_reply import answers, as_request
from .service import OrchestratorStatus
from .state import SagaState


class AsyncOrchestrator:
    """Starts and advances instances of `sagas`, kept in an async store.

    Open it with `AsyncOrchestrator.open`, on the loop its async steps are to run
    on; in a service, run `run()` as a task and cancel it to stop.

    Example::

        from eventcraft.eventstore import AsyncEventStore
        from eventcraft.sagas import AsyncOrchestrator, Saga, Step

        async def reserve(data, context):  # awaited on this loop
            return {"reservation": context.idempotency_key}

        fulfilment = Saga("fulfilment", [Step("reserve", reserve)])
        store = await AsyncEventStore.open("sqlite:///shop.db")
        orchestrator = await AsyncOrchestrator.open(store, [fulfilment])
        await orchestrator.start(fulfilment, {"order_id": "42"}, saga_id="42")
        assert await orchestrator.run_pending() == 0  # or a task: run(), cancelled to stop
        state = await orchestrator.state("fulfilment", "42")
        assert state.results == {"reserve": {"reservation": "saga-fulfilment:42/reserve"}}
        await store.close()
    """

    def __init__(self, orchestrator: Orchestrator, store: AsyncEventStore) -> None:
        self.orchestrator = orchestrator
        """The sync orchestrator doing the work, its steps rerouted to the loop."""
        self.store = store

    @classmethod
    async def open(
        cls,
        store: AsyncEventStore,
        sagas: Iterable[Saga],
        *,
        lease: float = 30.0,
        owner: str | None = None,
    ) -> AsyncOrchestrator:
        loop = asyncio.get_running_loop()
        face = cast(EventStore, BlockingEventStore.over(store))
        on_loop = [_steps_on(loop, saga) for saga in sagas]
        orchestrator = Orchestrator(face, on_loop, lease=lease, owner=owner)
        return cls(orchestrator, store)

    async def start(
        self,
        saga: Saga,
        data: dict[str, Any] | BaseModel,
        *,
        saga_id: str | None = None,
        correlation_id: str | None = None,
        subject: str | None = None,
        personal: Mapping[str, Any] | None = None,
    ) -> str:
        """Record a new instance and return its id; starting an existing id does nothing.

        `subject` and `personal` as for `Orchestrator.start`: personal data sealed.
        """
        return await asyncio.to_thread(
            functools.partial(
                self.orchestrator.start,
                saga,
                data,
                saga_id=saga_id,
                correlation_id=correlation_id,
                subject=subject,
                personal=personal,
            )
        )

    async def run_pending(self) -> int:
        """Advance every unfinished instance as far as it goes now; how many remain."""
        return await asyncio.to_thread(self.orchestrator.run_pending)

    async def run(self, *, poll: float = 0.2) -> None:
        """Keep advancing instances until cancelled, through outages of the store.

        The passes run in a worker thread; on cancellation the pass under way
        ends first (a step in flight finishes or times out), then this returns.
        """
        stop = threading.Event()
        passes = asyncio.create_task(asyncio.to_thread(self.orchestrator.run, stop, poll=poll))
        try:
            await asyncio.shield(passes)
        finally:
            stop.set()
            with contextlib.suppress(Exception):
                await asyncio.shield(passes)

    def status(self) -> OrchestratorStatus:
        """What the `run()` loop is doing; no store call."""
        return self.orchestrator.status()

    async def advance(self, name: str, saga_id: str) -> SagaState:
        return await asyncio.to_thread(self.orchestrator.advance, name, saga_id)

    async def state(self, name: str, saga_id: str) -> SagaState:
        return await asyncio.to_thread(self.orchestrator.state, name, saga_id)

    async def signal(
        self, name: str, saga_id: str, event: RecordedEvent, *, data: BaseModel | None = None
    ) -> bool:
        """`Orchestrator.signal`: `data`, the event's data typed, keeps its copy sealed."""
        return await asyncio.to_thread(
            functools.partial(self.orchestrator.signal, name, saga_id, event, data=data)
        )

    async def cancel(self, name: str, saga_id: str, reason: str) -> bool:
        return await asyncio.to_thread(self.orchestrator.cancel, name, saga_id, reason)

    async def parked(self) -> list[SagaState]:
        return await asyncio.to_thread(self.orchestrator.parked)

    async def retry(self, name: str, saga_id: str) -> SagaState:
        return await asyncio.to_thread(self.orchestrator.retry, name, saga_id)

    async def compensate(self, name: str, saga_id: str, reason: str) -> SagaState:
        """`Orchestrator.compensate`: a parked instance compensated on an operator's word."""
        return await asyncio.to_thread(self.orchestrator.compensate, name, saga_id, reason)

    async def resolve(self, name: str, saga_id: str, note: str) -> SagaState:
        return await asyncio.to_thread(self.orchestrator.resolve, name, saga_id, note)

    async def request(
        self,
        stream_id: str,
        command: NewEvent,
        *,
        reply_types: Sequence[str],
        timeout: float,
    ) -> RecordedEvent:
        """`sagas.request`, awaited on this orchestrator's store."""
        return await request_async(
            self.store, stream_id, command, reply_types=reply_types, timeout=timeout
        )


async def request_async(
    store: AsyncEventStore,
    stream_id: str,
    command: NewEvent,
    *,
    reply_types: Sequence[str],
    timeout: float,
) -> RecordedEvent:
    """Append `command` to `stream_id`, then await its reply; `ReplyTimeout` when it is late.

    The async twin of `sagas.request`: the same message and the same rule for
    what answers it; the wait is a subscription to the reply types.

    Example::

        import asyncio

        from eventcraft.eventstore import AsyncEventStore, NewEvent
        from eventcraft.sagas import request_async

        store = await AsyncEventStore.open("sqlite:///shop.db")

        async def courier_service():  # another service: it answers a booking
            async for booking in store.subscribe(0, types=["BookCourier"]):
                answer = {"causation_id": str(booking.id)}  # what says it answers the booking
                booked = NewEvent("CourierBooked", {"slot": "9:00"}, answer)
                await store.append(f"courier-{booking.data['parcel']}", [booked])
                break

        courier = asyncio.create_task(courier_service())
        command = NewEvent("BookCourier", {"parcel": 7})
        reply = await request_async(
            store, "parcel-7", command, reply_types=["CourierBooked"], timeout=10
        )
        assert reply.data == {"slot": "9:00"} and reply.stream_id == "courier-7"
        await courier
        await store.close()
    """
    after = (await store.append(stream_id, [as_request(command)], ANY)).positions[0]
    wanted = str(command.id)
    try:
        async with asyncio.timeout(timeout):
            async for event in store.subscribe(after, types=list(reply_types)):
                if answers(event, wanted):
                    return event
    except TimeoutError:
        pass
    raise ReplyTimeout(command.type, wanted, list(reply_types), timeout)


def _steps_on(loop: asyncio.AbstractEventLoop, saga: Saga) -> Saga:
    """`saga`, or a copy whose coroutine actions and compensations run on `loop`."""
    if not is_async(saga.compensation) and not any(
        is_async(s.action) or is_async(s.compensation) for s in saga.steps
    ):
        return saga
    steps = [
        dataclasses.replace(
            step,
            action=_on_loop(loop, step.action),
            compensation=_on_loop(loop, step.compensation),
        )
        for step in saga.steps
    ]
    retry = None if saga.start is None else saga.start.compensation_retry
    return Saga(
        saga.name,
        steps,
        timeout=saga.timeout,
        compensation=_on_loop(loop, saga.compensation),
        compensation_retry=retry,
    )


def _on_loop(loop: asyncio.AbstractEventLoop, action: Action | None) -> Any:
    if action is None or not is_async(action):
        return action
    return OnLoop(loop, action)
