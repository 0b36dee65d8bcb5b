"""`eventcraft console`: served in a process of its own on loopback by default, with a
warning anywhere else, a token when given one, and one line for what it cannot do."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from eventcraft.console.security import loopback

from ..cli.conftest import Run
from ..ports import free_port
from .conftest import APP, serving


def _get(url: str, **headers: str) -> tuple[int, str]:
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


@pytest.mark.slow
def test_the_console_serves_the_store_read_only_on_loopback(shop_url: str) -> None:
    with serving("--store", shop_url, "--app", APP) as served:
        status, page = _get(served.url + "/projections/order-notes")
        assert status == 200 and "ValueError: a negative amount" in page
        assert ">Retry<" not in page and "read-only" in page
        status, document = _get(served.url + "/events/1/download")
        assert json.loads(document)["type"] == "OrderPlaced"
        log = served.stop()
    assert f"eventcraft console on {served.url}/ (read-only)" in log
    assert "warning" not in log


@pytest.mark.slow
def test_the_console_warns_when_it_binds_beyond_loopback_and_needs_its_token(
    shop_url: str,
) -> None:
    with serving("--store", shop_url, host="0.0.0.0", token="t0ken") as served:
        assert _get(served.url + "/")[0] == 401
        assert _get(served.url + "/", Authorization="Bearer t0ken")[0] == 200
        log = served.stop()
    assert "warning: serving on 0.0.0.0, which other machines can reach" in log
    assert "t0ken" not in log  # the secret is never printed
    with serving("--store", shop_url, host="0.0.0.0") as served:
        log = served.stop()
    assert "without --token anyone who reaches it can read the log" in log


@pytest.mark.slow
def test_the_console_without_an_app_shows_the_log_and_no_projections(shop_url: str) -> None:
    with serving("--store", shop_url) as served:
        assert "The App names no projections" in _get(served.url + "/projections")[1]
        assert _get(served.url + "/log")[0] == 200


@pytest.mark.slow
def test_a_port_in_use_or_no_store_is_one_line(run: Run, shop_url: str) -> None:
    with serving("--store", shop_url) as served:
        port = served.url.rsplit(":", 1)[1]
        busy = run("--store", shop_url, "console", "--port", port)
    assert busy.code == 1
    assert busy.err.startswith(f"error: cannot listen on 127.0.0.1:{port}: ")
    assert len(busy.err.strip().splitlines()) == 1
    nowhere = run("console", "--port", str(free_port()))
    assert (nowhere.code, nowhere.err.strip()) == (
        2,
        "error: name the store: give --store URL or set EVENTCRAFT_STORE",
    )
    bad = run("--store", shop_url, "console", "--port", "70000")
    assert bad.code == 2 and "70000 is not in the range" in bad.err


@pytest.mark.parametrize(
    ("host", "only_here"),
    [
        ("127.0.0.1", True),
        ("127.8.0.1", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("192.168.1.4", False),
        ("example.com", False),
    ],
)
def test_loopback_is_this_machine_only(host: str, only_here: bool) -> None:
    assert loopback(host) is only_here
