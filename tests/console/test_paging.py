"""Every list of the console is paged, on memory, SQLite and PostgreSQL: with more rows
in the store than a page holds, each page shows at most `paging.MOST` and links to the
next, walking the links shows every row once, the error stores are read with a LIMIT,
and a larger `limit` is one clear error."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy as sa
from eventcraft.eventstore import EventStore, NewEvent
from eventcraft.messaging import IncomingMessage
from eventcraft.messaging import failed as error_store
from eventcraft.projections import Database, parking

from eventcraft.console.paging import MOST

from ..cli.apps import shop
from .conftest import POISON_AT, Client

BEYOND = MOST + 23
"""Rows of each kind the store holds: more than a page takes."""


@pytest.fixture
def crowded(shop_store: EventStore) -> EventStore:
    """The shop, and `BEYOND` of each: events of one correlation, events parked by
    `order-notes`, running `payout` sagas and messages an inbox refused."""
    bulk = [NewEvent("Bulked", {"n": n}, {"correlation_id": "bulk"}) for n in range(BEYOND)]
    shop_store.append("bulk-1", bulk)
    started: dict[str, object] = {"data": {}, "correlation_id": "bulk", "deadline": None}
    for n in range(BEYOND):
        shop_store.append(f"saga-payout:b{n:04}", [NewEvent("SagaStarted", started)])
    events = list(shop_store.read_stream("bulk-1"))
    with _database(shop.database, shop_store) as database, database.transaction() as connection:
        for event in events:
            parking.park(connection, "order-notes", event, ValueError("bulk"), 1)
    with _database(None, shop_store) as database, database.transaction() as connection:
        error_store.create(connection)
        for n in range(BEYOND):
            message = IncomingMessage(f"m{n:04}", b"{}", subject="bulk")
            error_store.record(connection, "bulk-in", message, ValueError("bulk"))
    return shop_store


@contextmanager
def _database(url: str | None, store: EventStore) -> Iterator[Database]:
    database = Database.of(url, store)
    try:
        yield database
    finally:
        database.close()


@contextmanager
def _statements() -> Iterator[list[str]]:
    """The SQL every engine runs meanwhile."""
    seen: list[str] = []

    def record(*arguments: Any) -> None:
        seen.append(str(arguments[2]))

    sa.event.listen(sa.engine.Engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        sa.event.remove(sa.engine.Engine, "before_cursor_execute", record)


def _walk(client: Client, url: str, rows: str, section: tuple[str, str | None]) -> list[str]:
    """Every row (`rows`, a pattern) of the `section` of each page from `url` on,
    following the Next links; asserting each page holds at most `MOST`."""
    console = client()
    seen: list[str] = []
    pages = 0
    while url:
        page = console.get(url)
        assert page.status_code == 200, html.unescape(page.text)[-500:]
        start, end = section
        text = page.text[page.text.index(start) : page.text.index(end) if end else None]
        found = re.findall(rows, text)
        assert 0 < len(found) <= MOST
        seen += found
        pages += 1
        following = re.search(r'id="(?:parked-)?next" href="([^"]+)"', page.text)
        url = html.unescape(following.group(1)) if following else ""
    assert pages > 1
    return seen


@pytest.mark.slow
def test_a_trace_larger_than_a_page_walks_page_by_page(client: Client, crowded: EventStore) -> None:
    seen = _walk(
        client, f"/trace?correlation=bulk&limit={MOST}", r"@(\d+) Bulked", ('id="trace"', None)
    )
    expected = [str(e.position) for e in crowded.read_stream("bulk-1")]
    assert seen == expected


@pytest.mark.slow
def test_a_projections_parked_events_walk_page_by_page_read_with_a_limit(
    client: Client, crowded: EventStore
) -> None:
    with _statements() as statements:
        first = client().get(f"/projections/order-notes?limit={MOST}")
    parked = [s for s in statements if "eventcraft_parked" in s and "ORDER BY" in s]
    assert parked and all("LIMIT" in s for s in parked)
    assert len(re.findall(r'<tr data-position="\d+"><td', first.text)) == MOST
    section = ('id="error-store"', 'id="message-store"')
    seen = _walk(
        client, f"/projections/order-notes?limit={MOST}", r'<tr data-position="(\d+)"', section
    )
    expected = [POISON_AT, *(e.position for e in crowded.read_stream("bulk-1"))]
    assert seen == [str(p) for p in expected]


@pytest.mark.slow
def test_saga_instances_walk_page_by_page(client: Client, crowded: EventStore) -> None:
    seen = _walk(client, f"/sagas?limit={MOST}", r'data-stream="([^"]+)"', ('id="instances"', None))
    expected = [s.stream_id for s in crowded.list_streams(category="saga")]
    assert seen == expected and len(seen) > MOST
    parked = client().get("/sagas").text
    assert len(re.findall(r"data-stream=", parked[: parked.index('id="instances"')])) == 2


def test_failed_messages_walk_page_by_page_read_with_a_limit(
    client: Client, crowded: EventStore
) -> None:
    with _statements() as statements:
        client().get(f"/messaging?limit={MOST}")
    listed = [s for s in statements if "eventcraft_inbox_failed" in s and "ORDER BY" in s]
    assert listed and all("LIMIT" in s for s in listed)
    seen = _walk(
        client, f"/messaging?limit={MOST}", r'data-id="([^"]+)"', ('id="inbox-failed"', None)
    )
    assert seen == [f"m{n:04}" for n in range(BEYOND)]


def test_a_page_of_the_log_holds_at_most_the_cap(client: Client, crowded: EventStore) -> None:
    console = client()
    page = console.get(f"/log?limit={MOST}").text
    assert len(re.findall(r'<tr data-position="', page)) == MOST and 'id="older"' in page


@pytest.mark.parametrize(
    "path",
    ["/log", "/trace?correlation=bulk", "/projections/order-notes", "/sagas", "/messaging"],
)
def test_a_limit_beyond_the_cap_is_one_clear_error(client: Client, path: str) -> None:
    separator = "&" if "?" in path else "?"
    for limit in (str(MOST + 1), "100000", str(2**63)):
        refused = client().get(f"{path}{separator}limit={limit}")
        assert refused.status_code == 400, path
        assert f"limit must be a whole number from 1 to {MOST}, not '{limit}'" in html.unescape(
            refused.text
        )
