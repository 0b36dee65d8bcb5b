"""The console on a store with known content: the command line's shop (its history, its
sagas, its projections caught up as far as they go), served in this process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from eventcraft.eventstore import EventStore
from starlette.testclient import TestClient

from eventcraft.console import create_app
from eventcraft.operations import projections

from ..cli.apps import fill_shop, run_sagas, shop
from ..cli.conftest import run as run  # the fixture running `eventcraft ...` in this process
from ..ports import free_port as free_port  # also the tests' own, for a port nothing listens on

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.cli.apps:shop"

LOCAL = "http://localhost"
"""Where the test clients open the console: a name it answers for unless told others
(TestClient's own, `testserver`, is not)."""

POISON_AT = 7
"""The position of the event `order-notes` stopped on and parked."""

Client = Callable[..., TestClient]


def fill_console(store: EventStore) -> None:
    """The shop's history and sagas, its projections caught up: `order-notes` stopped at 7,
    sagas f1 completed, p1 and p2 parked, d1 running."""
    assert fill_shop(store) == POISON_AT
    run_sagas(store)
    projections.catch_up(store, shop)


@pytest.fixture
def shop_store(store: EventStore) -> EventStore:
    """The shop on each backend in turn: memory, SQLite, PostgreSQL."""
    fill_console(store)
    return store


@pytest.fixture
def shop_url(shared_store_url: str) -> str:
    """The shop on SQLite and PostgreSQL, for a console in another process."""
    with EventStore.open(shared_store_url) as store:
        fill_console(store)
    return shared_store_url


@pytest.fixture
def client(shop_store: EventStore) -> Iterator[Client]:
    """A client of the console over `shop_store`: `client(allow_actions=True, token=...)`."""
    clients: list[TestClient] = []

    def make(**options: object) -> TestClient:
        made = TestClient(
            create_app(shop_store, shop, **options),  # type: ignore[arg-type]
            base_url=LOCAL,
        )
        clients.append(made)
        return made

    yield make
    for made in clients:
        made.close()


@dataclass
class Served:
    """`eventcraft console` running in a process of its own."""

    url: str
    process: subprocess.Popen[str]
    log: str | None = None

    def stop(self) -> str:
        """Stop it (as Ctrl+C does); what it wrote on stderr."""
        if self.log is not None:
            return self.log
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        assert self.process.stderr is not None
        with self.process.stderr:
            self.log = self.process.stderr.read()
        return self.log


def _environment(token: str | None, extra: dict[str, str]) -> dict[str, str]:
    found = {**os.environ, **extra}
    found.pop("EVENTCRAFT_CONSOLE_TOKEN", None)
    if token is not None:
        found["EVENTCRAFT_CONSOLE_TOKEN"] = token
    return found


@contextmanager
def serving(
    *arguments: str,
    host: str = "127.0.0.1",
    token: str | None = None,
    environment: dict[str, str] | None = None,
    allow_actions: bool = False,
    options: tuple[str, ...] = (),
) -> Iterator[Served]:
    """`eventcraft ARGUMENTS... console OPTIONS... --port P` started from the repository's
    root (where `tests.cli.apps` imports), once it answers HTTP; stopped afterwards."""
    port = free_port()
    command = [sys.executable, "-m", "eventcraft", *arguments, "console", "--host", host]
    if allow_actions:
        command.append("--allow-actions")
    command.extend(options)
    process = subprocess.Popen(
        [*command, "--port", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=_environment(token, environment or {}),
    )
    served = Served(f"http://127.0.0.1:{port}", process)
    deadline = time.monotonic() + 30
    try:
        while True:
            assert process.poll() is None, f"the console exited: {served.stop()}"
            try:
                urllib.request.urlopen(served.url + "/static/console.css", timeout=2).close()
                break
            except urllib.error.HTTPError:
                break  # it answers (a token may be needed)
            except OSError:
                assert time.monotonic() < deadline, "the console did not answer in 30 s"
                time.sleep(0.05)
        yield served
    finally:
        served.stop()
