"""The Catalog pages and the Event page's typed view, on memory, SQLite and PostgreSQL: what
the App's registry says of each event type beside what the store holds of each version,
how today's code reads each, and an event decoded by the registry next to its raw JSON."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator

import pytest
from eventcraft.eventstore import EventStore, NewEvent, TypeCount
from eventcraft.eventstore.retention import RetentionPolicy
from starlette.testclient import TestClient

from eventcraft.console import create_app
from eventcraft.operations import catalog

from . import catalog_app
from .catalog_app import AS_IS, NEWER, NO_PATH, UNFIT, UNREGISTERED, UPCAST
from .conftest import LOCAL, Client


@pytest.fixture
def catalog_store(store: EventStore) -> EventStore:
    catalog_app.fill(store)
    return store


@pytest.fixture
def console(catalog_store: EventStore) -> Iterator[TestClient]:
    with TestClient(create_app(catalog_store, catalog_app.app), base_url=LOCAL) as client:
        yield client


def _row(page: str, name: str) -> str:
    found = re.search(rf'<tr data-type="{name}">(.*?)</tr>', page, re.S)
    assert found is not None, name
    return found.group(1)


def _text(fragment: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


# --- the operation -----------------------------------------------------------------


def test_the_catalog_says_how_todays_code_reads_each_stored_version(
    catalog_store: EventStore,
) -> None:
    found = catalog.catalog_page(catalog_store, catalog_app.app)
    assert found.registry and found.next_after is None
    by_name = {entry.name: entry for entry in found.types}
    assert list(by_name) == ["CouponAdded", "OrderCancelled", "OrderPlaced", "OrderShipped"]
    placed = by_name["OrderPlaced"]
    assert (placed.version, placed.upcasters, dict(placed.personal)) == (
        2,
        (1,),
        {"email": "customer_id"},
    )
    assert (placed.readers.aggregates, placed.readers.projections) == (
        ("order",),
        ("order-totals",),
    )
    assert [(s.version, s.events, s.last_position, s.read) for s in placed.stored] == [
        (1, 1, UPCAST, catalog.UPCAST),
        (2, 2, UNFIT, catalog.AS_IS),  # the count cannot tell data that does not fit
        (3, 1, NEWER, catalog.NEWER),
    ]
    assert (placed.events, placed.unreadable) == (4, 1)
    shipped = by_name["OrderShipped"]
    assert [(s.version, s.read) for s in shipped.stored] == [
        (1, catalog.NO_PATH),
        (3, catalog.AS_IS),
    ]
    assert shipped.readers.sagas == ("delivery",)
    coupon = by_name["CouponAdded"]
    assert not coupon.registered and coupon.stored[0].read == catalog.UNREGISTERED
    assert by_name["OrderCancelled"].stored == () and by_name["OrderCancelled"].registered


def test_the_catalog_pages_by_name(catalog_store: EventStore) -> None:
    first = catalog.catalog_page(catalog_store, catalog_app.app, limit=3)
    assert [t.name for t in first.types] == ["CouponAdded", "OrderCancelled", "OrderPlaced"]
    assert first.next_after == "OrderPlaced"
    rest = catalog.catalog_page(catalog_store, catalog_app.app, after="OrderPlaced", limit=3)
    assert ([t.name for t in rest.types], rest.next_after) == (["OrderShipped"], None)


# --- the pages ---------------------------------------------------------------------


def test_the_catalog_page_lists_each_type_with_its_stored_versions_and_readers(
    console: TestClient, catalog_store: EventStore
) -> None:
    response = console.get("/catalog")
    assert response.status_code == 200
    page = response.text
    assert 'aria-current="page">Catalog<' in page
    placed = _row(page, "OrderPlaced")
    assert _text(placed).startswith("OrderPlaced 2 v1: 1 v2: 2 v3: 1")
    assert 'class="tag alert" title="newer than the code">v3: 1<' in placed
    assert "aggregates order" in _text(placed) and "projections order-totals" in _text(placed)
    assert "v1 → v2" in _text(placed) and "email (customer_id)" in _text(placed)
    newest = catalog_store.count_types(types="OrderPlaced")[-1]
    assert f'href="/events/{NEWER}"' in placed and newest.last_position == NEWER
    assert "sagas delivery" in _text(_row(page, "OrderShipped"))
    assert 'title="no upcast path">v1: 1<' in _row(page, "OrderShipped")
    assert "not registered" in _text(_row(page, "CouponAdded"))
    assert "none" in _text(_row(page, "OrderCancelled"))
    assert 'id="no-registry"' not in page


def test_a_type_page_shows_each_versions_schema_and_the_same_facts(
    console: TestClient,
) -> None:
    response = console.get("/catalog/OrderPlaced")
    assert response.status_code == 200
    page = response.text
    shown = re.search(r'<pre class="json" id="schema-2">(.*?)</pre>', page, re.S)
    assert shown is not None
    assert json.loads(html.unescape(shown.group(1))) == (
        catalog_app.OrderPlaced.model_json_schema()
    )
    assert "tests.console.catalog_app:OrderPlaced" in page
    assert "email (subject: customer_id)" in _text(page)
    assert "aggregates order; projections order-totals" in _text(page)
    versions = re.findall(r'<tr data-version="(\d+)">', page)
    assert versions == ["1", "2", "3"]
    assert 'class="alert">newer than the code<' in page
    assert "1 today's code cannot read" in _text(page)
    assert "Older versions' schemas are kept in a committed catalog" in page
    assert 'href="/log?type=OrderPlaced"' in page


def test_a_type_stored_without_a_class_has_a_page_saying_so(console: TestClient) -> None:
    page = console.get("/catalog/CouponAdded").text
    assert 'id="not-registered"' in page
    assert re.findall(r'<tr data-version="(\d+)">', page) == ["1"]
    assert "JSON Schemas" not in page


def test_a_type_neither_registered_nor_stored_is_404_and_bad_names_400(
    console: TestClient,
) -> None:
    missing = console.get("/catalog/Nothing")
    assert missing.status_code == 404
    assert "no event type 'Nothing'" in html.unescape(missing.text)
    long = console.get("/catalog/" + "x" * 300)
    assert long.status_code == 400 and "the limit is 255" in long.text
    for response in (missing, long):
        assert "Traceback" not in response.text


def test_without_a_registry_the_catalog_says_so_and_lists_the_stored_types(
    client: Client, shop_store: EventStore
) -> None:
    console = client()
    page = console.get("/catalog").text
    assert 'id="no-registry"' in page and "App(registry=...)" in page
    stored = {c.type for c in shop_store.count_types()}
    assert set(re.findall(r'<tr data-type="([^"]+)">', page)) == stored
    assert "not registered" not in page  # the notice says it once
    one = console.get("/catalog/OrderPlaced")
    assert one.status_code == 200 and 'id="no-registry"' in one.text


def test_an_event_page_shows_the_event_as_the_registry_decodes_it_beside_the_raw_json(
    console: TestClient, catalog_store: EventStore
) -> None:
    page = console.get(f"/events/{AS_IS}").text
    typed = re.search(r'<pre class="json" id="typed">(.*?)</pre>', page, re.S)
    assert typed is not None
    assert json.loads(html.unescape(typed.group(1))) == catalog_app.PLACED.model_dump()
    assert "tests.console.catalog_app:OrderPlaced, schema version 2" in page
    assert 'id="data"' in page  # the JSON as stored stays

    upcast = console.get(f"/events/{UPCAST}").text
    assert "upcast from version 1" in upcast
    shown = re.search(r'id="typed">(.*?)</pre>', upcast, re.S)
    assert shown is not None and json.loads(html.unescape(shown.group(1)))["cents"] == 500
    stored = re.search(r'id="data">(.*?)</pre>', upcast, re.S)
    assert stored is not None and json.loads(html.unescape(stored.group(1)))["euros"] == 5

    for position, error in [
        (UNFIT, "its data does not fit OrderPlaced"),
        (NO_PATH, "no upcaster from version 1 to 2"),
        (NEWER, "newer schema"),
        (UNREGISTERED, "no event class registered"),
    ]:
        page = console.get(f"/events/{position}").text
        assert 'id="typed"' not in page
        assert error in html.unescape(page), position
        assert 'id="data"' in page


def test_an_event_page_of_an_app_without_a_registry_shows_the_raw_json_alone(
    client: Client,
) -> None:
    page = client().get("/events/1").text
    assert 'id="data"' in page
    assert 'id="typed"' not in page and 'id="typed-error"' not in page


def test_the_counts_go_on_from_where_they_stopped_and_start_again_after_retention(
    shared_store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with EventStore.open(shared_store_url) as store:
        catalog_app.fill(store)
        asked: list[tuple[object, ...]] = []
        counted = store.count_types

        def spied(*arguments: object, **options: object) -> list[TypeCount]:
            asked.append(arguments)
            return counted(*arguments, **options)  # type: ignore[arg-type]

        monkeypatch.setattr(store, "count_types", spied)

        def shown() -> list[tuple[str, int, int, int]]:
            found = catalog.catalog_page(store, catalog_app.app).types
            return [(t.name, s.version, s.events, s.last_position) for t in found for s in t.stored]

        def fresh() -> list[tuple[str, int, int, int]]:
            return [(c.type, c.event_version, c.events, c.last_position) for c in counted()]

        assert shown() == fresh()
        store.append("order-6", [catalog_app.shop.to_new_event(catalog_app.PLACED, {})])
        store.append("coupon-2", [NewEvent("CouponAdded", {"code": "SUMMER"})])
        assert shown() == fresh()
        assert asked == [(0, UNREGISTERED), (UNREGISTERED, UNREGISTERED + 2)]

        head = store.high_water_mark()
        keep_one = RetentionPolicy("order", max_count=1)
        run = store.retention.remove([keep_one], [], head, "archive", store.now())
        assert run.removed == 1  # order-1's first event: each stream keeps its newest
        assert shown() == fresh()
        assert asked[-1] == (0, head)
