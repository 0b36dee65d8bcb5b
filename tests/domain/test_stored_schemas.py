"""verify_stored_events: what is really stored, read through today's registry, on every backend."""

from __future__ import annotations

from typing import Any

import pytest
from eventcraft.domain import DomainEvent, EventRegistry, verify_stored_events
from eventcraft.eventstore import EVENT_VERSION, EventStore, NewEvent


def shop_registry() -> EventRegistry:
    registry = EventRegistry()

    @registry.event("OrderPlaced", version=2)
    class OrderPlaced(DomainEvent):
        cents: int

    @registry.upcaster("OrderPlaced", from_version=1)
    def euros_to_cents(data: dict[str, Any]) -> dict[str, Any]:
        return {"cents": data.pop("euros") * 100}

    @registry.event("OrderShipped")
    class OrderShipped(DomainEvent):
        order_id: str

    return registry


def placed(version: int, data: dict[str, Any]) -> NewEvent:
    return NewEvent("OrderPlaced", data, metadata={EVENT_VERSION: version})


def test_events_are_counted_by_type_and_stored_version_and_failures_kept(
    store: EventStore,
) -> None:
    store.append("order-1", [placed(1, {"euros": 5}), placed(2, {"cents": 700})])
    store.append("order-2", [placed(1, {"euro": 5})])  # an upcaster that cannot read it
    store.append("order-3", [NewEvent("OrderShipped", {"order_id": "3"})])
    store.append("order-4", [NewEvent("CouponAdded", {"code": "x"})])  # no class for it
    store.append("order-5", [placed(3, {"cents": 1})])  # written by newer code

    found = verify_stored_events(store, shop_registry())

    rows = [
        (c.event_type, c.version, c.events, c.failed, c.first_failure, c.registered_version)
        for c in found.counts
    ]
    assert rows == [
        ("CouponAdded", 1, 1, 1, 5, None),
        ("OrderPlaced", 1, 2, 1, 3, 2),
        ("OrderPlaced", 2, 1, 0, None, 2),
        ("OrderPlaced", 3, 1, 1, 6, 2),
        ("OrderShipped", 1, 1, 0, None, 1),
    ]
    errors = {(c.event_type, c.version): c.error or "" for c in found.counts}
    assert "the upcaster from version 1 failed: KeyError('euros')" in errors[("OrderPlaced", 1)]
    assert "stream 'order-2'" in errors[("OrderPlaced", 1)]
    assert "written by a newer schema" in errors[("OrderPlaced", 3)]
    assert "no event class registered" in errors[("CouponAdded", 1)]
    assert (found.events, found.failed, found.upto, found.ok) == (6, 3, 6, False)
    last = {(c.event_type, c.version): c.last_position for c in found.counts}
    assert last[("OrderPlaced", 1)] == 3


def test_a_log_that_reads_is_ok_and_after_and_limit_bound_the_read(store: EventStore) -> None:
    store.append("order-1", [placed(2, {"cents": n}) for n in range(10)])
    found = verify_stored_events(store, shop_registry(), after=3, limit=4)
    assert found.ok
    assert (found.events, found.after, found.upto) == (4, 3, 7)


def test_a_sample_reads_windows_spread_over_the_log(sqlite_url: str) -> None:
    with EventStore.open(sqlite_url) as store:
        for batch in range(10):
            store.append(f"order-{batch}", [placed(2, {"cents": n}) for n in range(300)])
        store.append("order-bad", [placed(2, {"cents": "x"})])  # the last event
        found = verify_stored_events(store, shop_registry(), sample=500)
    assert found.sampled
    assert 400 <= found.events <= 700
    assert found.upto > 2_900  # the windows reach the end of the log
    full = verify_stored_events(EventStore.open(sqlite_url), shop_registry())
    assert (full.events, full.failed) == (3_001, 1)


@pytest.mark.parametrize(
    ("arguments", "says"), [({"limit": 0}, "limit"), ({"sample": 0}, "sample")]
)
def test_a_bound_that_is_no_count_is_refused(
    store: EventStore, arguments: dict[str, int], says: str
) -> None:
    with pytest.raises(ValueError, match=says):
        verify_stored_events(store, shop_registry(), **arguments)
