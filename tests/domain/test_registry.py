"""Event types by stable name, and upcasting of old stored events."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from eventcraft.domain import (
    EVENT_VERSION,
    DomainEvent,
    EventDecodingError,
    EventRegistry,
    NoUpcastPath,
    RegistrationError,
    UnknownEventType,
)
from eventcraft.eventstore import EventStore, NewEvent, RecordedEvent


class Renamed(DomainEvent):
    name: str


class PriceSet(DomainEvent):
    amount_cents: int
    currency: str


def stored(type: str, data: dict[str, Any], event_version: int | None = None) -> RecordedEvent:
    metadata = {} if event_version is None else {EVENT_VERSION: event_version}
    return RecordedEvent(uuid.uuid4(), "product-7", 4, 10, type, data, metadata, datetime.now(UTC))


def price_registry() -> EventRegistry:
    """PriceSet at version 3: v1 had `price` in euros, v2 added cents, v3 added currency."""
    registry = EventRegistry()
    registry.register(PriceSet, "PriceSet", version=3)

    @registry.upcaster("PriceSet", from_version=2)
    def add_currency(data: dict[str, Any]) -> dict[str, Any]:
        return {**data, "currency": "EUR"}

    @registry.upcaster("PriceSet", from_version=1)
    def to_cents(data: dict[str, Any]) -> dict[str, Any]:
        return {"amount_cents": round(data["price"] * 100)}

    return registry


def test_an_event_round_trips_under_its_registered_name_and_version() -> None:
    registry = price_registry()
    new = registry.to_new_event(PriceSet(amount_cents=5, currency="GBP"), {"correlation_id": "c"})
    assert new.type == "PriceSet"
    assert new.metadata == {"correlation_id": "c", EVENT_VERSION: 3}
    recorded = stored(new.type, {"amount_cents": 5, "currency": "GBP"}, 3)
    assert registry.decode(recorded) == PriceSet(amount_cents=5, currency="GBP")


def test_the_stored_name_does_not_depend_on_where_the_class_lives() -> None:
    # A class that moved (here: a different class object) reads the old events.
    class Moved(DomainEvent):
        name: str

    registry = EventRegistry()
    registry.register(Moved, "ProductRenamed")
    assert registry.decode(stored("ProductRenamed", {"name": "tea"})) == Moved(name="tea")


def test_old_versions_run_every_upcaster_in_order() -> None:
    registry = price_registry()
    assert registry.decode(stored("PriceSet", {"price": 1.5}, 1)) == PriceSet(
        amount_cents=150, currency="EUR"
    )
    assert registry.decode(stored("PriceSet", {"amount_cents": 7}, 2)) == PriceSet(
        amount_cents=7, currency="EUR"
    )


def test_an_event_without_a_version_is_version_1() -> None:
    decoded = price_registry().decode(stored("PriceSet", {"price": 2.0}))
    assert decoded == PriceSet(amount_cents=200, currency="EUR")


def test_an_upcaster_cannot_change_the_stored_event() -> None:
    recorded = stored("PriceSet", {"price": 1.0}, 1)
    price_registry().decode(recorded)
    assert recorded.data == {"price": 1.0}


def test_an_unknown_type_names_the_stream_version_and_type() -> None:
    with pytest.raises(UnknownEventType) as caught:
        price_registry().decode(stored("PriceDropped", {}))
    assert (caught.value.stream_id, caught.value.version) == ("product-7", 4)
    assert "'PriceDropped' at version 4 of stream 'product-7'" in str(caught.value)


@pytest.mark.parametrize(
    ("event_version", "why"),
    [
        (4, "newer schema"),
        (0, "not a positive int"),
        ("2", "not a positive int"),
    ],
)
def test_a_version_with_no_path_is_a_clear_error(event_version: object, why: str) -> None:
    with pytest.raises(NoUpcastPath, match=why) as caught:
        price_registry().decode(stored("PriceSet", {}, event_version))  # type: ignore[arg-type]
    assert "'PriceSet' at version 4 of stream 'product-7'" in str(caught.value)


def test_a_missing_step_in_the_chain_names_it() -> None:
    registry = EventRegistry()
    registry.register(PriceSet, "PriceSet", version=3)
    registry.upcaster("PriceSet", from_version=1)(lambda data: data)
    with pytest.raises(NoUpcastPath, match="no upcaster from version 2 to 3") as caught:
        registry.decode(stored("PriceSet", {"price": 1}, 1))
    assert (caught.value.stored_version, caught.value.current_version) == (1, 3)


def test_a_failing_or_wrong_upcaster_is_reported_with_the_event() -> None:
    registry = EventRegistry()
    registry.register(Renamed, "Renamed", version=2)
    registry.upcaster("Renamed", from_version=1)(lambda data: data["missing"])
    with pytest.raises(NoUpcastPath, match="upcaster from version 1 failed: KeyError"):
        registry.decode(stored("Renamed", {}, 1))


def test_stored_data_that_does_not_fit_the_class_is_a_clear_error() -> None:
    registry = EventRegistry()
    registry.register(Renamed, "Renamed")
    with pytest.raises(EventDecodingError, match="does not fit Renamed") as caught:
        registry.decode(stored("Renamed", {"name": "tea", "extra": 1}))
    assert caught.value.stream_id == "product-7"


def test_registering_a_name_or_class_twice_is_refused() -> None:
    registry = EventRegistry()
    registry.register(Renamed, "Renamed")
    with pytest.raises(RegistrationError, match="'Renamed' is already registered"):
        registry.register(PriceSet, "Renamed")
    with pytest.raises(RegistrationError, match="already registered as 'Renamed'"):
        registry.register(Renamed, "Other")
    registry.upcaster("Renamed", from_version=1)(lambda data: data)
    with pytest.raises(RegistrationError, match="already has an upcaster from version 1"):
        registry.upcaster("Renamed", from_version=1)(lambda data: data)


@pytest.mark.parametrize(
    "call",
    [
        lambda r: r.register(dict, "X"),
        lambda r: r.register(Renamed, ""),
        lambda r: r.register(Renamed, "X", version=0),
        lambda r: r.upcaster("X", from_version=0),
        lambda r: r.to_new_event(Renamed(name="unregistered"), {}),
    ],
    ids=["not-an-event", "empty-name", "version-0", "upcaster-0", "unregistered"],
)
def test_a_wrong_declaration_is_refused(call: Any) -> None:
    with pytest.raises(RegistrationError):
        call(EventRegistry())


ABSENT = "absent"


@pytest.mark.parametrize("url", ["memory://", "sqlite"])
@pytest.mark.parametrize(
    "event_version", [ABSENT, None, 1, 2, 3, 4, 0, -1, 2.0, "3", True, [3], {"v": 3}]
)
def test_an_encoded_read_decodes_as_a_decoded_one(
    url: str, event_version: object, tmp_path: Any
) -> None:
    # The repository loads through decode_encoded, which compares the stored
    # version's text; every stored version must end as decode's would.
    metadata = {} if event_version == ABSENT else {EVENT_VERSION: event_version}
    data: dict[str, Any] = {"amount_cents": 5, "currency": "EUR"}
    if event_version in (ABSENT, None, 1):
        data = {"price": 1.25}
    elif event_version == 2:
        data = {"amount_cents": 5}
    url = f"sqlite:///{tmp_path}/events.db" if url == "sqlite" else url
    with EventStore.open(url) as store:
        store.append("product-7", [NewEvent("PriceSet", data, metadata)])
        recorded = next(store.read_stream("product-7"))
        encoded = next(store.read_stream_encoded("product-7"))
    registry = price_registry()

    def outcome(decode: Any, *args: Any) -> object:
        try:
            return decode(*args)
        except (NoUpcastPath, EventDecodingError) as error:
            return type(error), str(error)

    assert outcome(registry.decode_encoded, encoded, "product-7") == outcome(
        registry.decode, recorded
    )
