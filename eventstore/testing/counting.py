"""The conformance suite's counts of the log, made without reading it out: events
(`count_events`) and events per type and schema version (`count_types`);
`EventStoreConformance` includes it."""

from __future__ import annotations

import pytest

from ..errors import InvalidEvent
from ..events import EVENT_VERSION, NewEvent
from ..store import EventStore
from ..type_counts import TypeCount
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
    """`count_events`: how many events a read of the log would bring, without reading them;
    `count_types`: how many of each type and stored schema version."""

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

    # --- per type and schema version ---------------------------------------------

    def _versioned_log(self, store: EventStore) -> None:
        def placed(version: object) -> NewEvent:
            return NewEvent("Placed", {}, {"user": "ann", EVENT_VERSION: version})

        store.append("order-1", [NewEvent("Placed", {}), placed(2), placed(2)])
        store.append("order-2", [NewEvent("Paid", {}, {"user": "bob"}), placed(1)])
        store.append("order-3", [placed("2"), placed(2.5), placed(None), placed(0)])
        store.append("user-1", [NewEvent("Registered", {}, {EVENT_VERSION: 3})])

    def test_count_types_counts_each_type_at_each_stored_version(self, store: EventStore) -> None:
        self._versioned_log(store)
        found = store.count_types()
        assert all(isinstance(counted, TypeCount) for counted in found)
        # No version, 1 and null are version 1; "2", 2.5 and 0 are no version: 0.
        assert [(c.type, c.event_version, c.events, c.last_position) for c in found] == [
            ("Paid", 1, 1, 4),
            ("Placed", 0, 3, 9),
            ("Placed", 1, 3, 8),
            ("Placed", 2, 2, 3),
            ("Registered", 3, 1, 10),
        ]
        recorded = {e.position: e.recorded_at for e in store.read_all()}
        assert [c.last_recorded_at for c in found] == [recorded[c.last_position] for c in found]

    def test_count_types_counts_what_read_all_brings(self, store: EventStore) -> None:
        self._versioned_log(store)
        for after, until, types in [
            (0, None, None),
            (3, None, None),
            (3, 8, None),
            (0, None, ["Placed"]),
            (4, 9, ["Placed", "Registered"]),
            (0, None, ["Nothing"]),
            (10, None, None),
            (0, 0, None),
        ]:
            read = list(store.read_all(after, types=types))
            counted = store.count_types(after, until, types=types)
            expected = [e for e in read if until is None or e.position <= until]
            assert sum(c.events for c in counted) == len(expected), (after, until, types)
            assert {c.type for c in counted} == {e.type for e in expected}
            last = {c.type: c.last_position for c in counted if c.event_version == 1}
            if "Placed" in last:
                assert last["Placed"] == max(
                    e.position
                    for e in expected
                    if e.type == "Placed" and e.metadata.get(EVENT_VERSION) in (None, 1)
                )

    def test_count_types_of_an_empty_log_is_empty(self, store: EventStore) -> None:
        assert store.count_types() == []
        assert store.count_types(types="Placed") == []

    @pytest.mark.parametrize(
        ("arguments", "named"),
        [
            ({"after": -1}, "after"),
            ({"until": -1}, "until"),
            ({"types": []}, "type"),
            ({"types": [""]}, "type"),
        ],
    )
    def test_count_types_refuses_bad_arguments_naming_them(
        self, store: EventStore, arguments: dict[str, object], named: str
    ) -> None:
        with pytest.raises(InvalidEvent, match=named):
            store.count_types(**arguments)  # type: ignore[arg-type]
