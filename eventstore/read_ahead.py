"""Items of an iterator made on a thread of its own, while the caller works on earlier ones."""

from __future__ import annotations

import queue
import threading
from collections.abc import Generator, Iterator
from typing import TypeVar

T = TypeVar("T")

DEPTH = 4
"""Items made ahead of the caller: enough to cover a slow item, few enough to bound memory."""

_HANDOVER_POLL = 0.1
"""Seconds a producer waits on a full queue before checking whether the caller left."""


def read_ahead(items: Iterator[T], depth: int = DEPTH) -> Generator[T, None, None]:
    """The items of `items`, in order, made on another thread up to `depth` ahead.

    Worth it when the caller spends its time waiting for I/O (a database
    answering an append) while making an item costs CPU (parsing lines): the
    one overlaps the other, as the thread holding the GIL changes whenever
    the caller waits. An exception raised while making an item is raised
    here, after every item made before it. A caller that stops early leaves
    the thread to notice at its next item and end.
    """
    handover: queue.Queue[tuple[bool, T | BaseException | None]] = queue.Queue(depth)
    left = threading.Event()

    def hand_over(entry: tuple[bool, T | BaseException | None]) -> bool:
        while not left.is_set():
            try:
                handover.put(entry, timeout=_HANDOVER_POLL)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not hand_over((True, item)):
                    return
        except BaseException as error:  # handed to the caller, who raises it
            hand_over((False, error))
            return
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()  # a generator's own clean-up runs now, on this thread
        hand_over((False, None))

    threading.Thread(target=produce, name="eventcraft-read-ahead", daemon=True).start()
    try:
        while True:
            more, value = handover.get()
            if more:
                yield value  # type: ignore[misc]
                continue
            if isinstance(value, BaseException):
                raise value
            return
    finally:
        left.set()
