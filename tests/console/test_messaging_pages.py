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
    asked = console.get("/messaging/failed/discard", params={"inbox": "orders-in", "id": "odd-1"})
    assert '<input name="note" placeholder="optional">' in asked.text  # a reason, not required
    settled = console.post(
        "/messaging/failed/discard",
        data={**stale, "attempts": "1", "note": "a test order"},
        follow_redirects=False,
    )
    assert settled.status_code == 303
    assert [f.message_id for f in operations.failed(with_messaging)] == ["bad-1"]
    [discarded] = operations.failed(with_messaging, discarded=True)
    assert (discarded.message_id, discarded.discard_reason) == ("odd-1", "a test order")


def test_a_discarded_message_is_listed_apart_its_record_kept_and_offers_no_actions(
    with_messaging: EventStore, client: Client
) -> None:
    operations.discard(with_messaging, "orders-in", "bad-1", "a <b>test</b> order")
    console = client(allow_actions=True)
    waiting = console.get("/messaging")
    assert 'data-id="odd-1"' in waiting.text and 'data-id="bad-1"' not in waiting.text
    listed = console.get("/messaging", params={"failed": "discarded"})
    assert listed.status_code == 200
    assert 'data-id="bad-1"' in listed.text and 'data-id="odd-1"' not in listed.text
    assert "a &lt;b&gt;test&lt;/b&gt; order" in listed.text
    assert "/messaging/failed/resend" not in listed.text
    named = {"inbox": "orders-in", "id": "bad-1"}
    view = console.get("/messaging/failed", params=named)
    assert view.status_code == 200 and 'id="discarded"' in view.text and 'id="erased"' in view.text
    assert "not json" not in view.text  # the discard erased the body
    assert 'id="resend"' not in view.text and 'id="discard"' not in view.text
    assert "/messaging/failed/download" not in view.text
    download = console.get("/messaging/failed/download", params=named)
    assert download.status_code == 409 and "its body was erased" in download.text
    for action in ("resend", "discard"):
        asked = console.get(f"/messaging/failed/{action}", params=named)
        assert asked.status_code == 409 and "was discarded at" in asked.text
    csrf = _csrf(console.get("/messaging/failed/discard", params={**named, "id": "odd-1"}).text)
    form = {"csrf": csrf, **named, "attempts": "1"}
    again = console.post("/messaging/failed/discard", data=form, follow_redirects=False)
    assert again.status_code == 409 and "not resent or discarded again" in again.text
    unknown = console.get("/messaging", params={"failed": "sometimes"})
    assert unknown.status_code == 400 and "there are: waiting, discarded" in unknown.text


def test_a_failed_message_page_says_nothing_was_done_until_something_was(
    with_messaging: EventStore, client: Client
) -> None:
    view = client().get("/messaging/failed", params={"inbox": "orders-in", "id": "bad-1"})
    assert view.status_code == 200 and 'role="status"' not in view.text


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
