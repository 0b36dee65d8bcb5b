"""A console reachable from other machines acts only for those who hold its token: without
one, `--allow-actions` beyond loopback is refused before anything is served (by the
command and by `create_app` alike), unless `--insecure-no-token` is typed out."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from eventcraft.eventstore import EventStore
from starlette.testclient import TestClient

from eventcraft.console import create_app
from eventcraft.operations import InputError

from ..cli.apps import shop
from ..ports import free_port
from .conftest import APP, ROOT, serving


@pytest.mark.parametrize(
    "where",
    [("--host", "0.0.0.0"), ("--host", "192.0.2.7"), ("--allow-host", "ops.example.com")],
)
@pytest.mark.slow
def test_actions_beyond_loopback_without_a_token_are_refused_in_one_line(
    shop_url: str, where: tuple[str, str]
) -> None:
    port = str(free_port())
    command = [sys.executable, "-m", "eventcraft", "--store", shop_url, "console", *where]
    # In a process of its own: a console that is not refused serves until stopped.
    try:
        refused = subprocess.run(
            [*command, "--allow-actions", "--port", port],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=30,
            env={k: v for k, v in os.environ.items() if k != "EVENTCRAFT_CONSOLE_TOKEN"},
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the console served actions beyond loopback without a token")
    assert refused.returncode == 2
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith("error: --allow-actions on ")
    assert "--token" in line and "--insecure-no-token" in line


@pytest.mark.slow
def test_actions_beyond_loopback_run_with_a_token_or_when_insecurity_is_typed_out(
    shop_url: str,
) -> None:
    with serving(
        "--store", shop_url, "--app", APP, host="0.0.0.0", token="t0ken", allow_actions=True
    ) as served:
        log = served.stop()
    assert "actions allowed" in log and "t0ken" not in log
    options = ("--insecure-no-token",)
    with serving(
        "--store", shop_url, "--app", APP, host="0.0.0.0", allow_actions=True, options=options
    ) as served:
        log = served.stop()
    assert "actions allowed" in log
    assert "warning: anyone who reaches it can act" in log
    with serving("--store", shop_url, "--app", APP, allow_actions=True) as served:
        log = served.stop()
    assert "warning" not in log  # loopback alone: no token needed


def test_create_app_refuses_actions_for_names_beyond_loopback_without_a_token(
    shop_store: EventStore,
) -> None:
    with pytest.raises(InputError, match=r"com., a name beyond loopback, needs a token"):
        create_app(shop_store, shop, allow_actions=True, hosts=["localhost", "ops.example.com"])
    with pytest.raises(InputError, match="token"):
        create_app(shop_store, shop, allow_actions=True, hosts=["10.1.2.3:8470"])
    made = {
        "token": create_app(
            shop_store, shop, allow_actions=True, hosts=["ops.example.com"], token="t"
        ),
        "typed out": create_app(
            shop_store, shop, allow_actions=True, hosts=["ops.example.com"], insecure_no_token=True
        ),
        "read-only": create_app(shop_store, shop, hosts=["ops.example.com"]),
    }
    for what, console in made.items():
        client = TestClient(console, base_url="http://ops.example.com")
        answered = client.get("/", headers={"Authorization": "Bearer t"})
        assert answered.status_code == 200, what
    loopback = create_app(shop_store, shop, allow_actions=True, hosts=["127.0.0.2:80", "[::1]"])
    assert TestClient(loopback, base_url="http://[::1]").get("/").status_code == 200
