"""Every page of the console, read-only, on memory, SQLite and PostgreSQL: what it shows
of the known history, its paging and filters, its downloads, and its errors."""

from __future__ import annotations

import html
import json
import re

import orjson
import pytest
from eventcraft.eventstore import EventStore

from eventcraft.operations import NotFound, log
from eventcraft.operations.documents import event_document
from eventcraft.operations.log import LogFilter

from .conftest import POISON_AT, Client

LABELS = ["Overview", "Log", "Streams", "Projections", "Sagas", "Messaging", "Catalog"]


def _positions(html: str) -> list[int]:
    return [int(p) for p in re.findall(r'<tr data-position="(\d+)"', html)]


def test_every_page_has_the_pinned_navigation_and_the_badges(
    client: Client, shop_store: EventStore
) -> None:
    console = client()
    for path in ["/", "/log", "/streams", "/projections", "/sagas", "/events/1", "/catalog"]:
        response = console.get(path)
        assert response.status_code == 200, path
        labels = re.findall(r"<nav>(.*?)</nav>", response.text, re.S)[0]
        assert re.findall(r">(\w+)</a>", labels) == LABELS
        # order-notes waits on the poison event and those after it; 1 event and 2 sagas parked.
        assert 'id="badge-failed">3<' in response.text, path
    waiting = re.search(r'id="badge-waiting">(\d+)<', console.get("/").text)
    assert waiting is not None and int(waiting.group(1)) > 0


def test_the_overview_shows_the_head_counts_lags_and_sagas(
    client: Client, shop_store: EventStore
) -> None:
    html = client().get("/").text
    head = shop_store.high_water_mark()
    assert f'id="head">{head}<' in html
    assert f'id="high-water-mark">{head}<' in html
    assert re.search(r">order</a></td><td class=\"number\">6<", html)  # order-1..4 hold 6
    assert "1 parked events, 2 parked sagas" in html
    assert re.search(r"status=parked\">parked</a></td><td class=\"number\">2<", html)
    assert html.count("<rect ") == 60  # one bar a minute over the hour


def test_the_log_pages_newest_first_by_position(client: Client, shop_store: EventStore) -> None:
    console = client()
    head = shop_store.high_water_mark()
    seen: list[int] = []
    url = "/log?limit=3"
    while url:
        html = console.get(url).text
        seen += _positions(html)
        older = re.search(r'id="older" href="([^"]+)"', html)
        url = older.group(1).replace("&amp;", "&") if older else ""
    assert seen == list(range(head, 0, -1))


def test_the_log_filters_by_category_type_correlation_and_time(
    client: Client, shop_store: EventStore
) -> None:
    console = client()

    def expected(where: LogFilter) -> list[int]:
        events = log.log_events(shop_store, after=0, limit=None, where=where)
        return sorted((e.position for e in events), reverse=True)

    orders = _positions(console.get("/log?category=order,payment").text)
    assert orders == expected(LogFilter(categories=("order", "payment")))
    assert len(orders) == 7
    placed = _positions(console.get("/log?type=OrderPlaced&category=order").text)
    assert placed == expected(LogFilter(types=("OrderPlaced",)))
    traced = _positions(console.get("/log?correlation=checkout-2").text)
    assert traced == [6, 4]
    assert _positions(console.get("/log?until=2000-01-01T00:00").text) == []
    assert _positions(console.get("/log?since=2000-01-01T00:00&limit=2").text) == [
        shop_store.high_water_mark(),
        shop_store.high_water_mark() - 1,
    ]


def test_the_live_tail_brings_the_events_after_a_position(
    client: Client, shop_store: EventStore
) -> None:
    html = client().get("/log/tail?after=5&category=order").text
    assert _positions(html) == expected_after(shop_store, 5, "order")
    assert "<nav>" not in html  # rows to put on top of the table, not a page


def expected_after(store: EventStore, after: int, category: str) -> list[int]:
    where = LogFilter(categories=(category,))
    return [e.position for e in log.log_events(store, after=after, limit=None, where=where)][::-1]


def test_an_event_page_shows_its_data_and_links_and_downloads_as_stored(
    client: Client, shop_store: EventStore
) -> None:
    console = client()
    stored = log.find_event(shop_store, "3")
    html = console.get("/events/3").text
    assert "OrderPaid" in html and str(stored.id) in html
    assert 'href="/stream?id=order-1"' in html
    assert 'href="/trace?correlation=checkout-1&near=3"' in html
    assert f'href="/events/{stored.metadata["causation_id"]}"' in html
    by_id = console.get(f"/events/{stored.id}")
    assert by_id.status_code == 200 and 'id="event-id">' + str(stored.id) in by_id.text
    download = console.get("/events/3/download")
    assert download.headers["content-disposition"] == 'attachment; filename="event-3.json"'
    assert json.loads(download.content) == event_document(stored)


def test_an_event_page_shows_its_tags_each_linking_to_the_log_of_that_tag(
    client: Client, shop_store: EventStore
) -> None:
    console = client()
    tagged = console.get("/events/4").text
    assert '<dt>tags</dt><dd id="tags">' in tagged
    assert '<a class="tag" href="/log?tag=customer%3Abob">customer:bob</a>' in tagged
    assert '<a class="tag" href="/log?tag=order%3A2">order:2</a>' in tagged
    assert 'id="tags"' not in console.get("/events/5").text  # ParcelSent has none


def test_the_log_shows_tags_and_filters_by_them(client: Client, shop_store: EventStore) -> None:
    console = client()
    page = console.get("/log?tag=customer:bob").text
    assert _positions(page) == [6, 4]
    assert '<span class="tag">customer:bob</span> <span class="tag">order:2</span>' in page
    assert 'name="tag" value="customer:bob"' in page
    assert _positions(console.get("/log?tag=customer:ann,order:1&type=OrderPaid").text) == [3]
    tail = console.get("/log/tail?after=3&tag=order:2").text
    assert _positions(tail) == [6, 4]


def test_filtered_lists_download_as_ndjson(client: Client, shop_store: EventStore) -> None:
    console = client()
    lines = console.get("/log.ndjson?category=order").content.splitlines()
    where = LogFilter(categories=("order",))
    stored = list(log.log_events(shop_store, after=0, limit=None, where=where))
    assert [orjson.loads(line) for line in lines] == [event_document(e) for e in stored]
    stream = console.get("/stream.ndjson?id=order-2")
    assert [orjson.loads(line)["type"] for line in stream.content.splitlines()] == [
        "OrderPlaced",
        "OrderCancelled",
    ]
    assert 'filename="order-2.ndjson"' in stream.headers["content-disposition"]


def test_streams_are_found_by_prefix_and_category(client: Client, shop_store: EventStore) -> None:
    console = client()
    html = console.get("/streams?prefix=order-").text
    listed = re.findall(r'stream\?id=([\w-]+)">', html)
    assert listed == ["order-1", "order-2", "order-3", "order-4"]
    exact = console.get("/streams?prefix=order-2").text
    assert re.findall(r'stream\?id=([\w-]+)">', exact) == ["order-2"]
    payments = console.get("/streams?category=payment").text
    assert re.findall(r'stream\?id=([\w-]+)">', payments) == ["payment-1"]
    stream = console.get("/stream?id=order-1").text
    assert _positions(stream) == [1, 3]
    assert stream.count(">View</a>") == 2 and stream.count(">Download</a>") == 2


def test_a_trace_shows_the_causation_tree(client: Client) -> None:
    html = client().get("/trace?correlation=checkout-1").text
    tree = re.sub(r"\s+", " ", html[html.index('id="trace"') :])
    # OrderPlaced caused PaymentTaken, which caused OrderPaid, which caused ParcelSent.
    order = re.findall(r"@(\d) (\w+)", tree)
    assert order == [
        ("1", "OrderPlaced"),
        ("2", "PaymentTaken"),
        ("3", "OrderPaid"),
        ("5", "ParcelSent"),
    ]
    assert tree.count("<ul>") == 3  # each a level below its cause
    assert "search the whole log" not in html


def test_a_trace_opened_from_an_event_searches_around_it(
    client: Client, shop_store: EventStore
) -> None:
    html = client().get("/trace?correlation=checkout-1&near=3").text
    assert f"Searched positions 1 to {shop_store.high_water_mark()}," in html
    assert 'id="whole-log" href="/trace?correlation=checkout-1"' in html
    assert re.findall(r"@(\d) ", html) == ["1", "2", "3", "5"]
    # The operation reads only the positions it is given.
    (root,) = log.trace(shop_store, "checkout-1", after=2, before=5)
    assert (root.event.position, [n.event.position for n in root.caused]) == (3, [])
    with pytest.raises(NotFound, match="in positions 6 to 9"):
        log.trace(shop_store, "checkout-1", after=5, before=10)


def test_the_projection_pages_show_the_three_stores(client: Client, shop_store: EventStore) -> None:
    console = client()
    listing = console.get("/projections").text
    assert 'data-name="orders"' in listing and 'data-name="order-notes"' in listing
    html = console.get("/projections/order-notes").text
    assert f'id="checkpoint">{POISON_AT - 1}<' in html  # stopped before the poison event
    error_store = html[html.index('id="error-store"') : html.index('id="message-store"')]
    assert _positions(error_store) == [POISON_AT]
    assert "ValueError: a negative amount: -5" in error_store
    message_store = html[html.index('id="message-store"') : html.index('id="message-log"')]
    assert _positions(message_store) == [POISON_AT, POISON_AT + 1]  # its OrderPlaced events
    message_log = html[html.index('id="message-log"') :]
    assert _positions(message_log) == [8, 7, 4, 1]  # every OrderPlaced, newest first
    parked = console.get(f"/projections/order-notes/parked/{POISON_AT}").text
    assert "Traceback" in parked and "a negative amount" in parked


def test_the_saga_pages_show_instances_and_a_timeline(client: Client) -> None:
    console = client()
    html = console.get("/sagas").text
    parked = html[html.index('id="parked-sagas"') : html.index('id="instances"')]
    assert re.findall(r'data-stream="([^"]+)"', parked) == ["saga-payout:p1", "saga-payout:p2"]
    running = console.get("/sagas?status=running").text
    instances = running[running.index('id="instances"') :]
    assert re.findall(r'data-stream="([^"]+)"', instances) == ["saga-delivery:d1"]
    timeline = console.get("/saga?name=payout&id=p1").text
    assert 'id="saga-status">parked<' in timeline
    assert "idempotency key <code>saga-payout:p1/" in timeline
    assert "no courier" in timeline and "payments is down" in timeline


def test_bad_input_gets_one_clear_error(client: Client) -> None:
    console = client()
    cases = {
        "/events/999": (404, "no event at position 999"),
        "/events/nope": (400, "neither a position nor an event id"),
        "/log?before=x": (400, "before must be a whole number from 1"),
        "/log?since=yesterday": (400, "since must be a time"),
        "/stream?id=nothing-1": (404, "no stream 'nothing-1'"),
        "/projections/nope": (404, "no projection 'nope'"),
        "/saga?name=payout&id=zz": (404, "no 'payout' saga with id 'zz'"),
        "/trace?correlation=nope": (404, "no event with correlation id"),
    }
    for path, (status, text) in cases.items():
        response = console.get(path)
        shown = html.unescape(response.text)
        assert (response.status_code, text in shown) == (status, True), path
        assert "Traceback" not in response.text


def test_pages_load_only_the_consoles_own_assets_and_cannot_be_framed(client: Client) -> None:
    response = client().get("/log")
    policy = response.headers["content-security-policy"]
    assert "default-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert response.headers["x-frame-options"] == "DENY"
    assert not re.findall(r'(?:src|href)="(?:https?:)?//', response.text)  # no CDN
    assert client().get("/static/console.js").status_code == 200


def test_the_live_tail_of_a_page_with_no_rows_starts_after_position_0(
    client: Client, shop_store: EventStore
) -> None:
    # What console.js asks when the table is empty: a filter that matched nothing yet.
    tail = client().get("/log/tail?after=0&category=order")
    assert tail.status_code == 200
    assert _positions(tail.text) == expected_after(shop_store, 0, "order")


def test_numbers_beyond_what_the_store_holds_are_one_clear_error(client: Client) -> None:
    console = client()
    most = "9223372036854775807"
    huge = "99999999999999999999"
    cases = {
        "/events/²": "'²' is neither a position nor an event id",
        f"/events/{huge}": f"a position must be a whole number from 0 to {most}",
        "/log?before=²": f"before must be a whole number from 1 to {most}, not '²'",
        f"/log?before={huge}": f"before must be a whole number from 1 to {most}",
        f"/log?limit={huge}": "limit must be a whole number from 1 to 500",
        f"/log/tail?after={huge}": "after must be a whole number from 0 to 9223372036854775806",
        f"/log.ndjson?after={huge}": "after must be a whole number from 0 to 9223372036854775806",
        f"/stream?id=order-1&from={huge}": f"from must be a whole number from 1 to {most}",
        f"/trace?correlation=checkout-1&near={huge}": "near must be a whole number from 1 to",
    }
    for path, text in cases.items():
        response = console.get(path)
        shown = html.unescape(response.text)
        assert (response.status_code, text in shown) == (400, True), (path, shown[-300:])
    # What the store refuses of a download is an error page too, not a 200 cut off.
    refused = console.get("/log.ndjson?category=%00")
    assert refused.status_code == 400 and "must not contain a NUL" in html.unescape(refused.text)
