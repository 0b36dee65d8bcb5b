"""The conformance suite's counts of the log; `EventStoreConformance` includes it."""

from __future__ import annotations

import pytest

from ..errors import InvalidEvent
from ..store import EventStore
from .events import events

_FILTERS: list[tuple[list[str] | None, list[str] | None]] = [
    (None, None),
    (["order"], None),
    (["order", "cart"], None),
    (None, ["Paid"]),
    (None, ["Paid", "Emptied"]),
    (["order"], ["Paid"]),
    (["cart", "order"], ["Placed", "Emptied"]),
    (["nothing"], None),
    (None, ["Nothing"]),
]


class CountingConformance:
    """`count_events`: how many events a read of the log would bring, without reading them."""

    def _log(self, store: EventStore) -> None:
        store.append("order-1", events("Placed", "Paid", "Shipped"))
        store.append("cart-1", events("Placed", "Emptied"))
        store.append("order-2", events("Placed", "Paid"))
        store.append("user-1", events("Registered"))

    @pytest.mark.parametrize(("categories", "types"), _FILTERS)
    def test_a_count_is_the_number_of_events_read_all_brings(
        self, store: EventStore, categories: list[str] | None, types: list[str] | None
    ) -> None:
        self._log(store)
        for after in (0, 3, 6, 8):
            read = list(store.read_all(after=after, categories=categories, types=types))
            counted = store.count_events(after, categories=categories, types=types)
            assert counted == len(read), (after, categories, types)

    def test_a_count_stops_at_until(self, store: EventStore) -> None:
        self._log(store)
        positions = [e.position for e in store.read_all(types="Placed")]
        assert store.count_events(until=positions[1], types="Placed") == 2
        assert store.count_events(positions[0], until=positions[1], types="Placed") == 1
        assert store.count_events(positions[1], until=positions[1], types="Placed") == 0
        assert store.count_events(until=0) == 0

    def test_a_count_stops_at_its_limit(self, store: EventStore) -> None:
        self._log(store)
        assert store.count_events(limit=3) == 3
        assert store.count_events(types=["Placed", "Paid"], limit=4) == 4
        assert store.count_events(categories="order", limit=100) == 5
        assert store.count_events(limit=0) == 0

    def test_an_empty_log_counts_nothing(self, store: EventStore) -> None:
        assert store.count_events() == 0
        assert store.count_events(categories="order", types="Paid", limit=10) == 0

    @pytest.mark.parametrize(
        ("arguments", "named"),
        [
            ({"after": -1}, "after"),
            ({"until": "9"}, "until"),
            ({"limit": -1}, "limit"),
            ({"categories": [""]}, "categor"),
            ({"types": [""]}, "type"),
        ],
    )
    def test_a_count_refuses_bad_arguments_naming_them(
        self, store: EventStore, arguments: dict[str, object], named: str
    ) -> None:
        with pytest.raises(InvalidEvent, match=named):
            store.count_events(**arguments)  # type: ignore[arg-type]
