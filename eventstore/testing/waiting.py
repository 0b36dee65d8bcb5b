"""The waiting part of the conformance suite; `EventStoreConformance` includes it."""

from __future__ import annotations

import threading

import pytest

from ..errors import InvalidEvent
from ..events import NewEvent
from ..store import EventStore

_LONG = 30.0
"""A timeout no passing test reaches: the waits below end by an append, not by time."""


class WaitingConformance:
    """`wait_for_events`: readers sleep until there is something past their position."""

    def test_a_wait_returns_at_once_when_events_are_there(self, store: EventStore) -> None:
        store.append("order-1", [NewEvent("Placed", {})])
        assert store.wait_for_events(after=0, timeout=_LONG) is True

    def test_a_wait_with_nothing_new_times_out_with_false(self, store: EventStore) -> None:
        position = store.append("order-1", [NewEvent("Placed", {})]).positions[0]
        assert store.wait_for_events(after=position, timeout=0.05) is False

    def test_a_waiting_reader_wakes_when_another_thread_appends(self, store: EventStore) -> None:
        position = store.append("order-1", [NewEvent("Placed", {})]).positions[0]
        waiting = threading.Event()
        answers: list[bool] = []

        def wait() -> None:
            waiting.set()
            answers.append(store.wait_for_events(after=position, timeout=_LONG))

        reader = threading.Thread(target=wait)
        reader.start()
        waiting.wait()
        appended = store.append("order-2", [NewEvent("Placed", {})]).positions[0]
        reader.join(timeout=_LONG)
        assert answers == [True]
        assert [e.position for e in store.read_all(after=position)] == [appended]

    @pytest.mark.parametrize("timeout", [-1, "1", None, True])
    def test_an_unusable_timeout_is_refused(self, store: EventStore, timeout: object) -> None:
        with pytest.raises(InvalidEvent, match="timeout"):
            store.wait_for_events(after=0, timeout=timeout)  # type: ignore[arg-type]
