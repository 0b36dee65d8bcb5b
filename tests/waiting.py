"""Waiting in tests for something another thread or process does: polled, bounded, named."""

from __future__ import annotations

import time
from collections.abc import Callable


def until(
    condition: Callable[[], bool],
    what: str = "the condition",
    seconds: float = 30.0,
    pause: float = 0.001,
) -> None:
    """Returns once `condition()` holds; fails naming `what` after `seconds`."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {seconds} s waiting for {what}")
        time.sleep(pause)
