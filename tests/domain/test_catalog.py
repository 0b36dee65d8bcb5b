"""The event catalog: what a registry writes and reads, as a stable file to commit."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import pytest
from eventcraft.domain import (
    Aggregate,
    CatalogError,
    DomainEvent,
    EventCatalog,
    EventRegistry,
    Readers,
    State,
    evolves,
)
from eventcraft.eventstore import Personal

shop = EventRegistry()


@shop.event("OrderPlaced", version=2)
class OrderPlaced(DomainEvent):
    order_id: str
    customer_id: str
    email: Annotated[str, Personal(subject="customer_id")]
    cents: int


@shop.upcaster("OrderPlaced", from_version=1)
def _placed_v1(data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "email": ""}


@shop.event("OrderShipped")
class OrderShipped(DomainEvent):
    order_id: str


class OrderState(State):
    placed: bool = False

    @evolves
    def on_placed(self, event: OrderPlaced) -> OrderState:
        return self.replace(placed=True)


class Order(Aggregate[OrderState]):
    category = "order"
    registry = shop


def test_the_catalog_lists_each_type_its_version_schema_upcasters_and_personal_fields() -> None:
    catalog = EventCatalog.of(shop)
    placed = catalog.types["OrderPlaced"]
    assert (placed.version, placed.upcasters) == (2, (1,))
    assert placed.schema == OrderPlaced.model_json_schema()
    assert placed.personal == {"email": "customer_id"}
    assert placed.class_name == f"{__name__}:OrderPlaced"
    assert catalog.types["OrderShipped"].upcasters == ()
    assert sorted(catalog.types) == ["OrderPlaced", "OrderShipped"]


def test_readers_are_the_aggregates_found_and_the_projections_and_sagas_named() -> None:
    catalog = EventCatalog.of(
        shop,
        projections={"order-list": ["OrderPlaced", "OrderShipped"], "audit": None},
        sagas={"shipping": ["OrderPlaced"]},
    )
    assert catalog.types["OrderPlaced"].readers == Readers(
        aggregates=("order",), projections=("audit", "order-list"), sagas=("shipping",)
    )
    assert catalog.types["OrderShipped"].readers == Readers(
        aggregates=(), projections=("audit", "order-list"), sagas=()
    )


def test_the_file_is_the_same_bytes_for_the_same_registry_and_reads_back_equal(
    tmp_path: Path,
) -> None:
    first, second = EventCatalog.of(shop).to_json(), EventCatalog.of(shop).to_json()
    assert first == second and first.endswith("}\n")
    path = tmp_path / "events.schema.json"
    EventCatalog.of(shop).write(path)
    assert path.read_text() == first
    assert EventCatalog.read(path) == EventCatalog.of(shop)
    assert [p.name for p in tmp_path.iterdir()] == ["events.schema.json"]


def test_older_versions_schemas_are_carried_from_the_previous_catalog() -> None:
    before = EventRegistry()

    @before.event("OrderPlaced")
    class Placed(DomainEvent):
        order_id: str
        customer_id: str
        cents: int

    previous = EventCatalog.of(before)
    catalog = EventCatalog.of(shop, previous=previous)
    placed = catalog.types["OrderPlaced"]
    assert sorted(placed.schemas) == [1, 2]
    assert placed.schemas[1] == Placed.model_json_schema()
    assert placed.schemas[2] == OrderPlaced.model_json_schema()


def test_a_type_no_longer_registered_stays_as_retired() -> None:
    before = EventRegistry()

    @before.event("CouponAdded")
    class CouponAdded(DomainEvent):
        code: str

    previous = EventCatalog.of(before)
    catalog = EventCatalog.of(shop, previous=previous)
    assert "CouponAdded" not in catalog.types
    assert catalog.retired["CouponAdded"].schema == CouponAdded.model_json_schema()
    again = EventCatalog.of(shop, previous=catalog)  # and stays retired after
    assert list(again.retired) == ["CouponAdded"]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("not json", "is not JSON"),
        ('{"types": {}}', "is not an eventcraft event catalog"),
        ('{"catalog": "eventcraft event catalog", "format": 9, "types": {}}', "format 9"),
        (
            '{"catalog": "eventcraft event catalog", "format": 1, '
            '"types": {"A": {"version": 2, "schemas": {"1": {}}}}}',
            "no schema for its version 2",
        ),
    ],
)
def test_a_file_that_is_no_catalog_is_refused_naming_it(
    tmp_path: Path, text: str, says: str
) -> None:
    path = tmp_path / "events.schema.json"
    path.write_text(text)
    with pytest.raises(CatalogError, match=says) as raised:
        EventCatalog.read(path)
    assert "events.schema.json" in str(raised.value)


def test_a_missing_file_is_one_clear_error() -> None:
    with pytest.raises(CatalogError, match=r"cannot read the catalog 'nowhere\.json'"):
        EventCatalog.read("nowhere.json")
