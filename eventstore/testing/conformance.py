"""The conformance suite every backend passes.

Subclass `EventStoreConformance` in a test module and provide a `store`
fixture that yields a fresh, empty `EventStore` on your backend::

    class TestMyBackend(EventStoreConformance):
        @pytest.fixture
        def store(self):
            with EventStore.open("mybackend://...") as store:
                yield store
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from ..errors import DuplicateEventId, InvalidEvent, WrongExpectedVersion
from ..events import (
    ANY,
    NO_STREAM,
    NewEvent,
)
from ..store import EventStore
from .closing import ClosingConformance
from .counting import CountingConformance
from .deletion import DeletionConformance
from .events import LARGE, events, many
from .imported_times import ImportConformance
from .input import InputConformance
from .many import AppendManyConformance
from .personal import PersonalConformance
from .query import QueryConformance
from .reads import ReadConformance
from .snapshots import SnapshotConformance
from .waiting import WaitingConformance


class EventStoreConformance(
    AppendManyConformance,
    ClosingConformance,
    CountingConformance,
    DeletionConformance,
    ImportConformance,
    InputConformance,
    PersonalConformance,
    QueryConformance,
    ReadConformance,
    SnapshotConformance,
    WaitingConformance,
):
    """Behaviour every backend must show. Needs a `store` fixture: a new, empty store.

    Example::

        import subprocess
        import sys
        from pathlib import Path

        # A test module of your backend's project: the suite, given a new store per test.
        Path("test_conformance.py").write_text('''
        import pytest
        from eventcraft.eventstore import EventStore
        from eventcraft.eventstore.testing import EventStoreConformance


        class TestMyBackend(EventStoreConformance):
            @pytest.fixture
            def store(self):
                with EventStore.open("memory://") as store:  # your backend's URL
                    yield store
        ''')
        pytest = [sys.executable, "-m", "pytest", "-q", "test_conformance.py"]
        run = subprocess.run(pytest, capture_output=True, text=True)
        assert run.returncode == 0 and " passed in " in run.stdout, run.stdout
    """

    # --- appending and optimistic concurrency ---------------------------------

    def test_a_new_stream_starts_at_version_1(self, store: EventStore) -> None:
        result = store.append("order-1", events("Placed", "Paid"), expected_version=NO_STREAM)
        assert result.version == 2
        assert len(result.positions) == 2
        assert result.positions[0] < result.positions[1]
        assert [e.version for e in store.read_stream("order-1")] == [1, 2]

    def test_positions_increase_across_streams(self, store: EventStore) -> None:
        a = store.append("order-1", events("Placed"))
        b = store.append("order-2", events("Placed", "Paid"))
        c = store.append("order-1", events("Paid"))
        positions = [*a.positions, *b.positions, *c.positions]
        assert positions == sorted(positions)
        assert len(set(positions)) == 4
        assert [e.position for e in store.read_all()] == positions

    def test_an_append_at_the_expected_version_succeeds(self, store: EventStore) -> None:
        store.append("order-1", events("Placed"), expected_version=NO_STREAM)
        result = store.append("order-1", events("Paid", "Shipped"), expected_version=1)
        assert result.version == 3
        assert store.append("order-1", events("Closed"), expected_version=3).version == 4

    def test_a_wrong_expected_version_writes_nothing(self, store: EventStore) -> None:
        store.append("order-1", events("Placed", "Paid"))
        before = list(store.read_all())
        with pytest.raises(WrongExpectedVersion) as caught:
            store.append("order-1", events("Shipped"), expected_version=1)
        assert (caught.value.stream_id, caught.value.expected, caught.value.actual) == (
            "order-1",
            1,
            2,
        )
        assert "order-1" in str(caught.value)
        assert list(store.read_all()) == before
        assert store.stream_version("order-1") == 2

    def test_no_stream_refuses_a_stream_that_exists(self, store: EventStore) -> None:
        store.append("order-1", events("Placed"))
        with pytest.raises(WrongExpectedVersion) as caught:
            store.append("order-1", events("Placed"), expected_version=NO_STREAM)
        assert caught.value.expected is NO_STREAM
        assert caught.value.actual == 1

    def test_expecting_a_version_of_a_missing_stream_fails(self, store: EventStore) -> None:
        with pytest.raises(WrongExpectedVersion) as caught:
            store.append("order-9", events("Paid"), expected_version=3)
        assert caught.value.actual == 0
        assert list(store.read_stream("order-9")) == []
        assert list(store.list_streams()) == []

    def test_expected_version_0_means_no_stream(self, store: EventStore) -> None:
        assert store.append("order-1", events("Placed"), expected_version=0).version == 1
        with pytest.raises(WrongExpectedVersion):
            store.append("order-1", events("Placed"), expected_version=0)

    def test_any_appends_whatever_the_version(self, store: EventStore) -> None:
        assert store.append("order-1", events("A"), expected_version=ANY).version == 1
        assert store.append("order-1", events("B", "C"), expected_version=ANY).version == 3

    # --- idempotent retries ----------------------------------------------------

    @pytest.mark.parametrize("expected", [ANY, NO_STREAM, 0], ids=["any", "no-stream", "zero"])
    def test_a_retried_append_returns_the_first_result_and_writes_nothing(
        self, store: EventStore, expected: object
    ) -> None:
        batch = events("Placed", "Paid")
        first = store.append("order-1", batch, expected_version=expected)  # type: ignore[arg-type]
        store.append("order-2", events("Placed"))
        again = store.append("order-1", batch, expected_version=expected)  # type: ignore[arg-type]
        assert again == first
        assert store.stream_version("order-1") == 2
        assert len(list(store.read_all())) == 3

    def test_a_retry_after_later_appends_still_returns_the_first_result(
        self, store: EventStore
    ) -> None:
        batch = events("Paid")
        store.append("order-1", events("Placed"))
        first = store.append("order-1", batch, expected_version=1)
        store.append("order-1", events("Shipped"), expected_version=2)
        assert store.append("order-1", batch, expected_version=1) == first
        assert store.stream_version("order-1") == 3

    def test_an_event_id_reused_in_another_stream_is_refused(self, store: EventStore) -> None:
        batch = events("Placed")
        store.append("order-1", batch)
        with pytest.raises(DuplicateEventId) as caught:
            store.append("order-2", batch)
        assert caught.value.event_id == batch[0].id
        assert "order-1" in str(caught.value)
        assert store.stream_version("order-2") == 0

    def test_stored_ids_in_another_order_are_refused(self, store: EventStore) -> None:
        batch = events("A", "B")
        store.append("order-1", batch)
        with pytest.raises(DuplicateEventId):
            store.append("order-1", list(reversed(batch)))
        assert store.stream_version("order-1") == 2

    def test_a_batch_mixing_stored_and_new_ids_writes_nothing(self, store: EventStore) -> None:
        batch = events("A")
        store.append("order-1", batch)
        with pytest.raises(DuplicateEventId):
            store.append("order-1", [*batch, *events("B")])
        assert [e.type for e in store.read_stream("order-1")] == ["A"]

    def test_a_batch_naming_one_id_twice_is_refused(self, store: EventStore) -> None:
        event = NewEvent("A", {})
        with pytest.raises(InvalidEvent, match="twice"):
            store.append("order-1", [event, event])
        assert list(store.read_all()) == []

    # --- large batches -----------------------------------------------------------

    def test_a_large_batch_is_one_append(self, store: EventStore) -> None:
        store.append("order-1", events("A"))
        result = store.append("order-1", many(LARGE), expected_version=1)
        assert result.version == LARGE + 1
        stored = list(store.read_stream("order-1", from_version=2))
        assert [e.position for e in stored] == list(result.positions)
        assert list(result.positions) == sorted(set(result.positions))
        assert [(e.version, e.data["n"]) for e in stored] == [(n + 2, n) for n in range(LARGE)]

    @pytest.mark.parametrize("expected", [ANY, NO_STREAM], ids=["any", "no-stream"])
    def test_a_large_batch_retried_returns_the_first_result(
        self, store: EventStore, expected: object
    ) -> None:
        batch = many(LARGE)
        first = store.append("order-1", batch, expected_version=expected)  # type: ignore[arg-type]
        again = store.append("order-1", batch, expected_version=expected)  # type: ignore[arg-type]
        assert again == first
        assert len(list(store.read_all())) == LARGE

    def test_a_large_batch_at_a_wrong_version_writes_nothing(self, store: EventStore) -> None:
        store.append("order-1", events("A", "B"))
        with pytest.raises(WrongExpectedVersion) as caught:
            store.append("order-1", many(LARGE), expected_version=1)
        assert (caught.value.expected, caught.value.actual) == (1, 2)
        assert len(list(store.read_all())) == 2
        assert store.append("order-1", many(LARGE), expected_version=2).version == LARGE + 2

    @pytest.mark.parametrize(
        "broken",
        [
            lambda limit: {"when": object()},
            lambda limit: {"price": math.nan},
            lambda limit: {"blob": "x" * limit},
        ],
        ids=["object", "nan", "too-large"],
    )
    def test_a_large_batch_with_an_unencodable_last_event_writes_nothing(
        self, store: EventStore, broken: Callable[[int], dict[str, object]]
    ) -> None:
        batch = [*many(LARGE - 1), NewEvent("Broken", broken(store.max_event_bytes))]
        with pytest.raises(InvalidEvent, match=rf"event {LARGE - 1} \('Broken'\)"):
            store.append("order-1", batch)
        assert list(store.read_all()) == []
        assert list(store.list_streams()) == []
        assert store.append("order-1", many(LARGE)).version == LARGE  # and the store goes on

    def test_a_large_batch_reusing_a_stored_id_at_its_end_writes_nothing(
        self, store: EventStore
    ) -> None:
        stored = events("A")
        store.append("order-2", stored)
        with pytest.raises(DuplicateEventId) as caught:
            store.append("order-1", [*many(LARGE - 1), *stored])
        assert caught.value.event_id == stored[0].id
        assert store.stream_version("order-1") == 0
        assert len(list(store.read_all())) == 1
