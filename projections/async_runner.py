"""`AsyncProjectionRunner`: projections and subscriptions kept from an `AsyncEventStore`.

The runner is `ProjectionRunner`, whole: the same projectors, checkpoints in
the read model's transaction, leases, parking and error policies. Read models
are written through SQLAlchemy, which blocks, so each definition still
follows the log in a worker thread; what is async is the rest:

- the log is read and waited on through the caller's `AsyncEventStore`, on
  the caller's loop (a `BlockingEventStore.over` it hands the threads);
- a `Subscription` whose handler is a coroutine function has it awaited on
  that loop, the worker waiting for it before it moves the checkpoint;
- `run()` is a coroutine to run as a task (cancel it to stop), and
  `catch_up`, `wait_until`, `status` and `close` are awaited.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import weakref
from collections.abc import Awaitable, Callable, Iterable, Sequence
from types import TracebackType
from typing import Any, cast

import sqlalchemy as sa
from eventcraft.eventstore import AsyncEventStore, BlockingEventStore, RecordedEvent

from .database import Database
from .definition import Definition
from .runner import ProjectionRunner
from .status import ProjectionStatus
from .subscription import Subscription
from .typed_event import TypedEvent

# One face per store, so that runners opened one after another on a memory store
# find the read models of the ones before (Database keeps them per store object).
_faces: weakref.WeakKeyDictionary[AsyncEventStore, BlockingEventStore] = weakref.WeakKeyDictionary()


class AsyncProjectionRunner:
    """Keeps `definitions` up to date from an async store's log.

    Example::

        import asyncio

        from eventcraft.eventstore import AsyncEventStore, NewEvent
        from eventcraft.projections import AsyncProjectionRunner, Subscription

        mailed = []

        async def send_receipt(event) -> None:  # awaited on this loop
            mailed.append(event.stream_id)

        receipts = Subscription("receipts", send_receipt, types=["OrderPaid"])
        async with await AsyncEventStore.open("sqlite:///shop.db") as store:
            runner = await AsyncProjectionRunner.open(store, [receipts])
            async with runner:
                following = asyncio.create_task(runner.run())
                written = await store.append("order-1", [NewEvent("OrderPaid", {"cents": 900})])
                await runner.wait_until(written.positions[-1])  # read your own writes
                following.cancel()
        assert mailed == ["order-1"]
    """

    def __init__(self, runner: ProjectionRunner) -> None:
        self.runner = runner
        """The sync runner doing the work, for what this face does not offer."""

    @classmethod
    async def open(
        cls,
        store: AsyncEventStore,
        definitions: Iterable[Definition],
        *,
        database: Database | sa.Engine | str | None = None,
        batch_size: int = 500,
        lease_ttl: float | None = 10.0,
    ) -> AsyncProjectionRunner:
        """A runner over `store`; the arguments are `ProjectionRunner`'s."""
        face = _faces.get(store)
        if face is None:
            face = _faces[store] = BlockingEventStore.over(store)
        loop = asyncio.get_running_loop()
        on_loop = [_handlers_on(loop, definition) for definition in definitions]
        runner = await asyncio.to_thread(
            ProjectionRunner,
            face,  # type: ignore[arg-type]  # EventStore's methods, run on the loop
            on_loop,
            database=database,
            batch_size=batch_size,
            lease_ttl=lease_ttl,
        )
        return cls(runner)

    async def catch_up(self, *names: str) -> None:
        """Apply everything up to the log's head now, then return."""
        await asyncio.to_thread(self.runner.catch_up, *names)

    async def run(self) -> None:
        """Follow the log until cancelled; then stop the followers and return."""
        self.runner.start()
        try:
            await asyncio.Future()  # until cancelled
        finally:
            await asyncio.shield(asyncio.to_thread(self.runner.stop))

    async def wait_until(
        self, position: int, timeout: float = 10.0, names: Sequence[str] | None = None
    ) -> None:
        """Until every projection (or those `names`d) has applied up to `position`;
        raises as `ProjectionRunner.wait_until`."""
        await asyncio.to_thread(self.runner.wait_until, position, timeout, names)

    async def status(self) -> list[ProjectionStatus]:
        return await asyncio.to_thread(self.runner.status)

    async def close(self) -> None:
        await asyncio.to_thread(self.runner.close)

    async def __aenter__(self) -> AsyncProjectionRunner:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


def _handlers_on(loop: asyncio.AbstractEventLoop, definition: Definition) -> Definition:
    """`definition`, or a copy of it whose coroutine handler runs on `loop`."""
    if not (
        isinstance(definition, Subscription) and inspect.iscoroutinefunction(definition.handler)
    ):
        return definition
    handler = cast(Callable[[Any], Awaitable[Any]], definition.handler)

    def on_loop(event: RecordedEvent | TypedEvent[Any]) -> None:
        asyncio.run_coroutine_threadsafe(handler(event), loop).result()  # type: ignore[arg-type]

    delivered = copy.copy(definition)
    delivered.handler = on_loop
    return delivered
