"""The Messaging page: relays as they last said they stood, and the inboxes' error store
with View, Download, Resend and Discard, on memory, SQLite and PostgreSQL."""

from __future__ import annotations

import re
import time

import pytest
from eventcraft.eventstore import EventStore
from eventcraft.messaging import Inbox, IncomingMessage, relay_state
from eventcraft.projections import Database

from eventcraft.operations import messaging as operations

from ..messaging.workers import order_received
from .conftest import Client


@pytest.fixture
def with_messaging(shop_store: EventStore) -> EventStore:
    """The shop, a relay that last said it was paused, and two messages an inbox refused."""
    with Inbox("orders-in", shop_store, order_received) as inbox:
        inbox.take(IncomingMessage("good-1", b'{"order": 1}', subject="orders"))
        inbox.take(IncomingMessage("bad-1", b"not json", {"x-source": "shop"}, "orders"))
        inbox.take(IncomingMessage("odd-1", b"{}", subject="orders"))
    database = Database.of(None, shop_store)
    try:
        with database.transaction() as connection:
            relay_state.create(connection)
            relay_state.write(
                connection,
                relay_state.RelayState(
                    "orders-out", "rabbitmq 127.0.0.1:5672", "paused", time.time(), "refused", 2, 0
                ),
            )
    finally:
        database.close()
    return shop_store


def _csrf(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html
    return found[1]


def test_the_page_shows_relays_and_the_error_store(
    with_messaging: EventStore, client: Client
) -> None:
    page = client().get("/messaging")
    assert page.status_code == 200
    assert '<tr data-name="orders-out">' in page.text and "alert" in page.text
    assert "refused" in page.text and "rabbitmq 127.0.0.1:5672" in page.text
    assert 'data-id="bad-1"' in page.text and 'data-id="odd-1"' in page.text
    assert "Resend" not in page.text and "Discard" not in page.text  # read-only
    assert ">Messaging<" in client().get("/").text  # in the navigation of every page


def test_a_failed_message_is_viewed_and_downloaded_as_it_came(
    with_messaging: EventStore, client: Client
) -> None:
    view = client().get("/messaging/failed", params={"inbox": "orders-in", "id": "bad-1"})
    assert view.status_code == 200
    assert "not json" in view.text and "x-source" in view.text and "Traceback" in view.text
    body = client().get("/messaging/failed/download", params={"inbox": "orders-in", "id": "bad-1"})
    assert body.status_code == 200 and body.content == b"not json"
    assert "attachment" in body.headers["content-disposition"]
    missing = client().get("/messaging/failed", params={"inbox": "orders-in", "id": "x"})
    assert missing.status_code == 404 and "no failed message with id" in missing.text


def test_resend_and_discard_are_confirmed_and_rechecked(
    with_messaging: EventStore, client: Client
) -> None:
    console = client(allow_actions=True)
    confirm = console.get("/messaging/failed/resend", params={"inbox": "orders-in", "id": "bad-1"})
    assert confirm.status_code == 200 and "store it again" in confirm.text
    form = {"csrf": _csrf(confirm.text), "inbox": "orders-in", "id": "bad-1", "attempts": "1"}
    done = console.post("/messaging/failed/resend", data=form, follow_redirects=False)
    assert done.status_code == 303, done.text
    assert [f.resend for f in operations.failed(with_messaging, "orders-in")] == [True, False]

    stale = {**form, "id": "odd-1", "attempts": "7"}  # not what the store holds now
    refused = console.post("/messaging/failed/discard", data=stale, follow_redirects=False)
    assert refused.status_code == 409 and "changed since you confirmed" in refused.text
    gone = console.post(
        "/messaging/failed/discard", data={**stale, "attempts": "1"}, follow_redirects=False
    )
    assert gone.status_code == 303
    assert [f.message_id for f in operations.failed(with_messaging)] == ["bad-1"]


def test_a_read_only_console_refuses_the_actions(
    with_messaging: EventStore, client: Client
) -> None:
    console = client()
    asked = console.get("/messaging/failed/discard", params={"inbox": "orders-in", "id": "bad-1"})
    assert asked.status_code == 403
    forged = console.post(
        "/messaging/failed/discard",
        data={"csrf": "x", "inbox": "orders-in", "id": "bad-1", "attempts": "1"},
    )
    assert forged.status_code == 403
    assert len(operations.failed(with_messaging)) == 2


def test_a_store_no_relay_or_inbox_used_shows_none(shop_store: EventStore, client: Client) -> None:
    page = client().get("/messaging")
    assert page.status_code == 200
    assert "No relay has run on this store." in page.text and "None." in page.text
