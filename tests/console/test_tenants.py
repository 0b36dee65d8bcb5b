"""The console over a URL template with `{tenant}`: a tenant picker, and each tenant's pages
under `/t/TENANT/`, every one of them reading that tenant's store alone. `shown_tenants`
(`--tenants`) limits the tenants shown: any other tenant's page is 404 and never names it;
so is a hostile tenant id in the URL, answered without a traceback."""

from __future__ import annotations

import html
import re
import urllib.error
import urllib.request
import uuid
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import psycopg
import pytest
from eventcraft.eventstore import EventStore, NewEvent
from starlette.testclient import TestClient

from eventcraft import App
from eventcraft.console import create_app
from eventcraft.operations import InputError
from eventcraft.operations import tenants as operations

from ..cli.apps import HEALED, shop
from ..cli.conftest import Run
from ..conftest import PG_URL, _need_postgres
from .conftest import APP, LOCAL, POISON_AT, fill_console, serving

SECRET = "globex-secret-zq81"
"""What only globex's events hold."""

_LINK = re.compile(r'(?:href|src|action)="([^"]*)"')


@pytest.fixture(params=["sqlite", "postgres"])
def template(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL template: a SQLite file per tenant, or a PostgreSQL schema."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/{{tenant}}.db"
        return
    _need_postgres()
    prefix = f"cc{uuid.uuid4().hex[:8]}_"
    yield f"{PG_URL}?schema={prefix}{{tenant}}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        for (schema,) in conn.execute(
            "SELECT nspname FROM pg_namespace WHERE starts_with(nspname, %s)", (prefix,)
        ).fetchall():
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture
def two(template: str) -> str:
    """acme: the console tests' shop; globex: events in the same streams, and a stream of
    its own, holding `SECRET`."""
    with EventStore.open(operations.tenant_url(template, "acme")) as acme:
        fill_console(acme)
    with EventStore.open(operations.tenant_url(template, "globex")) as globex:
        for stream in ["order-1", "order-2", "payment-1", "fulfilment-f1"]:
            globex.append(stream, [NewEvent("OrderPlaced", {"customer": SECRET})])
        globex.append(SECRET, [NewEvent("Secret", {"note": SECRET})])
    return template


def _console(template: str, **options: object) -> TestClient:
    return TestClient(create_app(template, shop, **options), base_url=LOCAL)  # type: ignore[arg-type]


def _links(page: str) -> list[str]:
    return [link.replace("&amp;", "&") for link in _LINK.findall(page)]


def test_the_picker_lists_the_tenants_and_links_to_their_pages(two: str) -> None:
    with _console(two) as browser:
        picker = browser.get("/")
        assert picker.status_code == 200
        assert [link for link in _links(picker.text) if link.startswith("/t/")] == [
            "/t/acme/",
            "/t/globex/",
        ]
        acme = browser.get("/t/acme/")
        assert acme.status_code == 200 and 'id="tenant"' in acme.text
        globex = browser.get("/t/globex/log")
        assert globex.status_code == 200 and SECRET in globex.text


@pytest.mark.slow
def test_no_page_of_acme_shows_globex(two: str) -> None:
    """Every page reachable from acme's overview, by every link its pages hold: each link
    stays under /t/acme/ (or leads to the picker), and no page names globex or its data."""
    seen: set[str] = set()
    waiting = deque(["/t/acme/"])
    with _console(two) as browser:
        while waiting and len(seen) < 120:
            path = waiting.popleft()
            if path in seen:
                continue
            seen.add(path)
            page = browser.get(path)
            assert page.status_code in (200, 404), (path, page.status_code)
            assert SECRET not in page.text and "globex" not in page.text.lower(), path
            if "html" not in page.headers.get("content-type", ""):
                continue
            for link in _links(page.text):
                target = urljoin(path, link)
                parts = urlsplit(target)
                if parts.scheme or parts.netloc or target.startswith("#"):
                    continue
                assert parts.path == "/" or parts.path.startswith("/t/acme/"), (path, link)
                if parts.path.startswith("/t/acme/") and "/static/" not in parts.path:
                    waiting.append(target.partition("#")[0])
    assert len(seen) > 20  # the log, streams, events, projections, sagas, the catalog ...


def test_a_tenant_not_shown_is_404_and_never_named(two: str) -> None:
    with _console(two, shown_tenants=["acme"]) as browser:
        picker = browser.get("/")
        assert "/t/acme/" in picker.text and "globex" not in picker.text
        for path in ["/t/globex/", "/t/globex/log", f"/t/globex/streams/{SECRET}", "/t/x/"]:
            hidden = browser.get(path)
            assert hidden.status_code == 404, path
            assert "globex" not in hidden.text and SECRET not in hidden.text
            assert "no such tenant" in hidden.text
        assert browser.get("/t/acme/log").status_code == 200


def test_a_tenant_without_a_store_is_404_and_not_made(two: str) -> None:
    with _console(two) as browser:
        missing = browser.get("/t/initech/")
        assert missing.status_code == 404 and "initech" not in missing.text
    assert operations.list_tenants(two) == ["acme", "globex"]


HOSTILE = [
    "",
    "%20",
    "..",
    "%2e%2e",
    "%2E%2E%2Fglobex",
    "acme%2F..%2Fglobex",
    "a" * 5000,
    "%00",
    "acme%00",
    "acme%0Aglobex",
    "%1b%5b31m",
    "ACME",
    "acme'%3B%20DROP%20SCHEMA%20public%3B--",
    "acme%22%3E%3Cscript%3E",
    "con",
    "-acme",
    "%F0%9F%92%A5",
    "%FF",
]


@pytest.mark.parametrize("hostile", HOSTILE)
def test_a_hostile_tenant_id_is_a_clean_404(two: str, hostile: str) -> None:
    with _console(two, shown_tenants=["acme"]) as browser:  # a 500 would raise here
        for path in [f"/t/{hostile}/", f"/t/{hostile}/log", f"/t/{hostile}/events/1"]:
            answered = browser.get(path)
            sent = answered.request.url.raw_path.decode()
            if sent.startswith("/t/"):
                assert answered.status_code in (400, 404), (path, answered.status_code)
            else:  # the client resolved `..` itself: the picker, which lists acme alone
                assert answered.status_code in (200, 404)
            assert "Traceback" not in answered.text and "globex" not in answered.text.lower()
            assert SECRET not in answered.text and "<script>" not in answered.text
    assert operations.list_tenants(two) == ["acme", "globex"]


def test_an_action_under_a_tenant_acts_on_its_store_and_stays_under_its_prefix(
    two: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    retry = f"/t/acme/projections/order-notes/parked/{POISON_AT}/retry"
    with _console(two, allow_actions=True, shown_tenants=["acme"]) as browser:
        confirm = browser.get(retry)
        assert confirm.status_code == 200
        assert f'id="back" href="/t/acme/projections/order-notes/parked/{POISON_AT}"' in (
            confirm.text
        )
        fields = dict(
            re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', confirm.text)
        )
        fields = {name: html.unescape(value) for name, value in fields.items()}
        hidden = browser.post(retry.replace("/t/acme/", "/t/globex/"), data=fields)
        assert hidden.status_code == 404 and "globex" not in hidden.text
        monkeypatch.setenv(HEALED, "1")
        done = browser.post(retry, data=fields, follow_redirects=False)
        assert done.status_code == 303 and done.headers["location"].startswith("/t/acme/")
        after = browser.get(done.headers["location"]).text
        assert f"event {POISON_AT} retried; 0 still parked" in html.unescape(after)


def test_options_that_need_one_store_or_a_template_are_refused(
    two: str, sqlite_url: str, run: Run
) -> None:
    with pytest.raises(InputError, match="metrics are served for one store"):
        create_app(two, shop, metrics=True)
    with pytest.raises(InputError, match="a store URL with \\{tenant\\}"):
        create_app(sqlite_url, shop, shown_tenants=["acme"])
    with pytest.raises(InputError, match="tenant id 'Acme' has capital letters"):
        create_app(two, shop, shown_tenants=["Acme"])
    with pytest.raises(InputError, match=r"App\.database"):
        create_app(two, App(database=sqlite_url))
    EventStore.open(sqlite_url).close()
    for arguments, said in [
        (("--store", sqlite_url, "console", "--tenants", "acme"), "--tenants needs"),
        (("--store", two, "--tenant", "acme", "console", "--tenants", "acme"), "give one"),
        (("--store", two, "console", "--tenants", "acme,Globex"), "capital letters"),
    ]:
        refused = run(*arguments)
        assert refused.code == 2 and said in refused.err, refused.err
        assert len(refused.err.strip().splitlines()) == 1


@pytest.mark.slow
def test_eventcraft_console_on_a_template_serves_the_tenants_it_is_told(two: str) -> None:
    with serving("--store", two, "--app", APP, options=("--tenants", "acme")) as served:
        with urllib.request.urlopen(served.url + "/") as picker:
            listed = picker.read().decode()
        assert "/t/acme/" in listed and "globex" not in listed
        with urllib.request.urlopen(served.url + "/t/acme/log") as log:
            assert log.status == 200 and SECRET not in log.read().decode()
        with pytest.raises(urllib.error.HTTPError) as hidden:
            urllib.request.urlopen(served.url + "/t/globex/log")
        assert hidden.value.code == 404
        assert "globex" not in hidden.value.read().decode()
    assert "Traceback" not in served.stop()


def test_a_tenant_dropped_while_the_console_runs_is_404_and_not_made_again(two: str) -> None:
    with _console(two) as browser:
        assert browser.get("/t/globex/log").status_code == 200
        operations.drop_tenant(two, "globex")  # as `eventcraft tenant drop` would, elsewhere
        gone = browser.get("/t/globex/log")
        assert gone.status_code == 404 and SECRET not in gone.text
        assert "/t/globex/" not in browser.get("/").text
    assert operations.list_tenants(two) == ["acme"]


def test_an_app_database_with_tenant_is_read_per_tenant(two: str, tmp_path: Path) -> None:
    per_tenant = App(
        projections=shop.projections,
        sagas=shop.sagas,
        database=f"sqlite:///{tmp_path}/rm-{{tenant}}.db",
    )
    with TestClient(create_app(two, per_tenant), base_url=LOCAL) as browser:
        for tenant in ["acme", "globex"]:
            assert browser.get(f"/t/{tenant}/projections").status_code == 200
    assert (tmp_path / "rm-acme.db").is_file() and (tmp_path / "rm-globex.db").is_file()
    assert not (tmp_path / "rm-{tenant}.db").exists()
