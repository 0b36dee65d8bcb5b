"""Calling a step's action or compensation, plain or async, within its timeout."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Iterable
from typing import Any

from .context import StepContext
from .definition import Action, Saga
from .errors import EventLoopRunning, StepTimedOut


def call(
    function: Action, data: dict[str, Any], context: StepContext, timeout: float | None
) -> Any:
    """`function(data, context)`'s result; `StepTimedOut` once `timeout` seconds pass.

    A plain function that overruns is left to finish in its thread (Python
    cannot stop it); its late result is ignored, and the step's idempotency
    key is what keeps the retry or the compensation that follows safe.
    """
    if isinstance(function, OnLoop):
        return function.within(data, context, timeout)
    if inspect.iscoroutinefunction(function):
        return asyncio.run(_awaited(function, data, context, timeout))
    if timeout is None:
        return _settled(function(data, context), context.step)
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            # Awaited here, in a thread with no loop of its own: its result
            # is the awaitable's, as without a timeout.
            outcome["result"] = _settled(function(data, context), context.step)
        except BaseException as error:  # handed to the caller's thread
            outcome["error"] = error

    worker = threading.Thread(target=run, name=f"saga-step:{context.step}", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise StepTimedOut(context.step, timeout)
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("result")


class OnLoop:
    """A coroutine action or compensation that runs on `loop` (an async orchestrator's),
    called from the orchestrator's worker thread.

    `call` hands it the try's own cut-off (the step's timeout, or the saga's
    deadline if sooner): past it the coroutine is cancelled on the loop and
    awaited to its end, as `asyncio.run` ends it in the sync orchestrator, so
    it cannot take effect after its compensation began.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, function: Action) -> None:
        self.loop = loop
        self.function = function

    def __call__(self, data: dict[str, Any], context: StepContext) -> Any:
        return self.within(data, context, None)

    def within(self, data: dict[str, Any], context: StepContext, timeout: float | None) -> Any:
        awaited = _awaited(self.function, data, context, timeout)
        future = asyncio.run_coroutine_threadsafe(awaited, self.loop)
        try:
            return future.result()
        finally:
            # A caller that stops waiting for any other reason takes the try with it.
            future.cancel()


def refuse_in_running_loop(method: str, sagas: Iterable[Saga]) -> None:
    """Raise `EventLoopRunning` if this thread's event loop runs and a saga has async steps.

    Asked before anything is recorded: `asyncio.run` cannot run the steps
    here, and a failure of that kind is the caller's, not the business's.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return  # no loop running in this thread: asyncio.run will do
    for saga in sagas:
        steps = [s.name for s in saga.steps if is_async(s.action) or is_async(s.compensation)]
        if steps:
            listed = ", ".join(steps)
            reason = f"saga {saga.name!r} has async steps ({listed}); nothing was recorded"
            raise EventLoopRunning(method, reason)


def is_async(function: Action | None) -> bool:
    # An object whose __call__ is async is not a coroutine function to inspect.
    dunder = type(function).__call__ if function is not None else None
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(dunder)


def _settled(result: Any, step: str) -> Any:
    """`result`, or what it resolves to if it is awaitable."""
    if not inspect.isawaitable(result):
        return result
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_resolved(result))
    # A plain function that returned an awaitable, called from a running loop:
    # not started, so nothing took effect; the try is left for a caller in a
    # thread to take over, with the same key.
    if inspect.iscoroutine(result):
        result.close()
    reason = f"step {step!r} returned an awaitable; its try is left to be taken over"
    raise EventLoopRunning("run_pending", reason)


async def _awaited(
    function: Action, data: dict[str, Any], context: StepContext, timeout: float | None
) -> Any:
    try:
        return await asyncio.wait_for(_resolved(function(data, context)), timeout)
    except TimeoutError:
        raise StepTimedOut(context.step, timeout or 0.0) from None


async def _resolved(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value
