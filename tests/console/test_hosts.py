"""The console answers only for the host names it was started for: a page of another
name (a DNS rebinding, which points the attacker's name at 127.0.0.1) is refused before
any route runs, and an action is refused from any origin but those names."""

from __future__ import annotations

import html
import re
import urllib.error
import urllib.request

import pytest
from eventcraft.eventstore import EventStore
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

from eventcraft.cli.console_commands import ANSWERED_LOOPBACK
from eventcraft.console import create_app
from eventcraft.console.security import LOOPBACK

from ..cli.apps import shop
from .conftest import APP, POISON_AT, serving

DISCARD = f"/projections/order-notes/parked/{POISON_AT}/discard"
HOSTS = ("127.0.0.1:8470", "localhost:8470", "[::1]:8470")


def _console(store: EventStore, base_url: str) -> TestClient:
    return TestClient(create_app(store, shop, allow_actions=True, hosts=HOSTS), base_url=base_url)


def _csrf(page: str) -> str:
    return html.unescape(re.findall(r'name="csrf" value="([^"]*)"', page)[0])


def test_a_request_for_another_host_name_is_refused_before_any_route(
    shop_store: EventStore,
) -> None:
    csrf = _csrf(_console(shop_store, "http://127.0.0.1:8470").get(DISCARD).text)
    rebound = _console(shop_store, "http://rebind.attacker.example:8470")
    for path in ("/", "/log", "/events/1/download", DISCARD, "/static/console.js"):
        refused = rebound.get(path)
        assert refused.status_code == 400, path
        assert "csrf" not in refused.text and "OrderPlaced" not in refused.text
    posted = rebound.post(
        DISCARD,
        data={"csrf": csrf, "attempts": "1"},
        headers={"Origin": "http://rebind.attacker.example:8470"},
        follow_redirects=False,
    )
    assert posted.status_code == 400
    other_port = _console(shop_store, "http://127.0.0.1:9999")
    assert other_port.get("/").status_code == 400
    assert "1 parked events" in _console(shop_store, "http://localhost:8470").get("/").text


def test_an_action_from_an_origin_outside_the_names_is_refused(shop_store: EventStore) -> None:
    console = _console(shop_store, "http://127.0.0.1:8470")
    fields = {"csrf": _csrf(console.get(DISCARD).text), "attempts": "1"}
    for origin in ("http://rebind.attacker.example:8470", "http://127.0.0.1:9999", "null"):
        refused = console.post(DISCARD, data=fields, headers={"Origin": origin})
        assert refused.status_code == 403 and "another origin" in refused.text, origin
    # Another of its own names is the same console.
    done = console.post(
        DISCARD, data=fields, headers={"Origin": "http://localhost:8470"}, follow_redirects=False
    )
    assert done.status_code == 303


def _get(url: str, host: str) -> int:
    request = urllib.request.Request(url, headers={"Host": host})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code


@pytest.mark.slow
def test_the_console_command_answers_its_loopback_names_and_the_names_it_is_given(
    shop_url: str,
) -> None:
    with serving("--store", shop_url, "--app", APP, allow_actions=True) as served:
        port = served.url.rsplit(":", 1)[1]
        assert _get(served.url + "/", f"127.0.0.1:{port}") == 200
        assert _get(served.url + "/", f"localhost:{port}") == 200
        assert _get(served.url + "/", f"rebind.attacker.example:{port}") == 400
        assert _get(served.url + "/log", "rebind.attacker.example") == 400
    options = ("--allow-host", "ops.example.com")
    with serving("--store", shop_url, options=options) as served:
        port = served.url.rsplit(":", 1)[1]
        assert _get(served.url + "/", "ops.example.com") == 200  # behind a proxy: any port
        assert _get(served.url + "/", f"ops.example.com:{port}") == 200
        assert _get(served.url + "/", f"127.0.0.1:{port}") == 200
        assert _get(served.url + "/", "evil.example.com") == 400


def test_a_console_made_without_hosts_answers_only_the_loopback_names(
    shop_store: EventStore,
) -> None:
    """A service that mounts the console and names no hosts is not open to a DNS
    rebinding: it answers the loopback names alone, on any port, until told more."""
    made = create_app(shop_store, shop, allow_actions=True)
    for base_url in ("http://localhost", "http://127.0.0.1:8000", "http://[::1]:5000"):
        assert TestClient(made, base_url=base_url).get("/").status_code == 200, base_url
    for base_url in ("http://evil.example", "http://localhost.evil.example:8000"):
        refused = TestClient(made, base_url=base_url).get("/log")
        assert refused.status_code == 400, base_url
        assert "OrderPlaced" not in refused.text and "hosts=" in refused.text
    service = Starlette(routes=[Mount("/ops", app=create_app(shop_store, shop))])
    assert TestClient(service, base_url="http://evil.example").get("/ops/").status_code == 400
    assert TestClient(service, base_url="http://localhost:80").get("/ops/").status_code == 200
    named = create_app(shop_store, shop, hosts=["ops.example.com"])
    assert TestClient(named, base_url="http://ops.example.com").get("/").status_code == 200
    assert TestClient(named, base_url="http://localhost").get("/").status_code == 400


def test_an_action_on_a_console_made_without_hosts_comes_from_a_loopback_origin(
    shop_store: EventStore,
) -> None:
    console = TestClient(create_app(shop_store, shop, allow_actions=True), base_url="http://[::1]")
    fields = {"csrf": _csrf(console.get(DISCARD).text), "attempts": "1"}
    refused = console.post(DISCARD, data=fields, headers={"Origin": "http://evil.example"})
    assert refused.status_code == 403 and "another origin" in refused.text
    done = console.post(
        DISCARD, data=fields, headers={"Origin": "http://localhost:8470"}, follow_redirects=False
    )
    assert done.status_code == 303


def test_the_default_names_are_those_the_console_command_starts_from() -> None:
    assert set(LOOPBACK) == set(ANSWERED_LOOPBACK)
