"""Calling a step's action or compensation, plain or async, within its timeout."""

from __future__ import annotations

import asyncio
import inspect
import threading
from typing import Any

from .context import StepContext
from .definition import Action
from .errors import StepTimedOut


def call(
    function: Action, data: dict[str, Any], context: StepContext, timeout: float | None
) -> Any:
    """`function(data, context)`'s result; `StepTimedOut` once `timeout` seconds pass.

    A plain function that overruns is left to finish in its thread (Python
    cannot stop it); its late result is ignored, and the step's idempotency
    key is what keeps the retry or the compensation that follows safe.
    """
    if inspect.iscoroutinefunction(function):
        return asyncio.run(_awaited(function, data, context, timeout))
    if timeout is None:
        result = function(data, context)
        return asyncio.run(_resolved(result)) if inspect.isawaitable(result) else result
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = function(data, context)
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


async def _awaited(
    function: Action, data: dict[str, Any], context: StepContext, timeout: float | None
) -> Any:
    try:
        return await asyncio.wait_for(_resolved(function(data, context)), timeout)
    except TimeoutError:
        raise StepTimedOut(context.step, timeout or 0.0) from None


async def _resolved(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value
