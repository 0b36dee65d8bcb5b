"""read_ahead: the import's line parsing on a thread of its own keeps the order and the errors."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from eventcraft.eventstore.read_ahead import read_ahead


def test_items_come_in_order_made_on_another_thread() -> None:
    makers: set[str] = set()

    def numbers() -> Iterator[int]:
        for n in range(1000):
            makers.add(threading.current_thread().name)
            yield n

    assert list(read_ahead(numbers(), depth=3)) == list(range(1000))
    assert makers == {"eventcraft-read-ahead"}


def test_an_error_comes_after_every_item_made_before_it() -> None:
    def failing() -> Iterator[int]:
        yield 1
        yield 2
        raise ValueError("line 3: not JSON")

    seen: list[int] = []
    with pytest.raises(ValueError, match="line 3"):
        for item in read_ahead(failing()):
            seen.append(item)
    assert seen == [1, 2]


def test_a_caller_that_stops_early_ends_the_thread() -> None:
    finished = threading.Event()

    def endless() -> Iterator[int]:
        try:
            n = 0
            while True:
                yield n
                n += 1
        finally:
            finished.set()

    items = read_ahead(endless(), depth=2)
    assert [next(items) for _ in range(5)] == [0, 1, 2, 3, 4]
    items.close()
    assert finished.wait(timeout=10)
