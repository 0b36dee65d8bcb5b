"""What the console says on its pages comes from the console: the status line an action
leaves is signed by the running console, so a link carrying `?message=` of its own shows
nothing; and ids from the log go into links encoded, as every other link's values."""

from __future__ import annotations

import html
import re
from urllib.parse import parse_qsl, urlencode, urlsplit

from eventcraft.eventstore import EventStore, NewEvent

from .conftest import POISON_AT, Client

DISCARD = f"/projections/order-notes/parked/{POISON_AT}/discard"
SPOOF = "Session expired: log in at https://evil.example/login"


def _status_line(page: str) -> str | None:
    found = re.search(r'<p class="message" role="status">(.*?)</p>', page, re.S)
    return html.unescape(found.group(1)) if found else None


def test_a_message_the_console_did_not_sign_is_not_shown(client: Client) -> None:
    console = client(allow_actions=True)
    for path in ("/", "/log", "/projections/order-notes", "/sagas", "/messaging"):
        page = console.get(f"{path}?{urlencode({'message': SPOOF})}").text
        assert _status_line(page) is None and "evil.example" not in page, path


def test_an_actions_status_line_is_shown_only_as_the_console_signed_it(client: Client) -> None:
    console = client(allow_actions=True)
    page = console.get(DISCARD).text
    csrf = html.unescape(re.findall(r'name="csrf" value="([^"]*)"', page)[0])
    done = console.post(DISCARD, data={"csrf": csrf, "attempts": "1"}, follow_redirects=False)
    assert done.status_code == 303
    location = done.headers["location"]
    said = f"event {POISON_AT} discarded; 0 still parked"
    assert _status_line(console.get(location).text) == said
    # The same signature with other words, or the words without it, show nothing.
    path, query = urlsplit(location).path, dict(parse_qsl(urlsplit(location).query))
    for forged in ({**query, "message": SPOOF}, {"message": query["message"]}):
        assert _status_line(console.get(f"{path}?{urlencode(forged)}").text) is None
    # Another console (another process) does not take this one's signature.
    assert _status_line(client().get(location).text) is None


def test_a_causation_id_goes_into_its_link_encoded(client: Client, shop_store: EventStore) -> None:
    cause = "../saga/cancel?name=payout&id=d1#x y"
    metadata = {"causation_id": cause, "correlation_id": "odd"}
    (position,) = shop_store.append("odd-1", [NewEvent("Odd", {}, metadata)]).positions
    page = client().get(f"/events/{position}").text
    encoded = "..%2Fsaga%2Fcancel%3Fname%3Dpayout%26id%3Dd1%23x%20y"
    assert f'id="cause-link" href="/events/{encoded}"' in page
