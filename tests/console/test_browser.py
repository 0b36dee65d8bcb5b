"""The console in a real browser: Playwright driving Debian's Chromium (launched by its
path, nothing downloaded) clicks through every page of a console serving the shop, with
and without `--allow-actions`, and takes a screenshot of each page.

Screenshots go to build/console-artifacts/ (ignored by git); with
EVENTCRAFT_CONSOLE_SCREENSHOTS=docs/console they are the README's.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from eventcraft.eventstore import EventStore, NewEvent

from eventcraft.operations import log
from eventcraft.operations import sagas as saga_operations
from eventcraft.operations.documents import event_document

from ..cli.apps import HEALED, shop
from ..cli.test_projections import _notes
from ..conftest import missing
from . import catalog_app
from .conftest import APP, POISON_AT, ROOT, fill_console, serving

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SHOTS = ROOT / os.environ.get("EVENTCRAFT_CONSOLE_SCREENSHOTS", "build/console-artifacts")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        missing(f"{CHROMIUM} is missing (scripts/ensure-chromium.sh installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    opened = context.new_page()
    opened.set_default_timeout(15_000)
    yield opened
    context.close()


def _shot(page: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def test_every_page_read_only_with_downloads_and_no_action(page: Any, sqlite_url: str) -> None:
    with EventStore.open(sqlite_url) as store:
        fill_console(store)
        stored = log.find_event(store, "3")
    with serving("--store", sqlite_url, "--app", APP) as served:
        page.goto(served.url + "/")
        assert page.locator("#badge-failed").inner_text() == "3"
        assert page.locator("nav a").all_inner_texts() == [
            "Overview",
            "Log",
            "Streams",
            "Projections",
            "Sagas",
            "Messaging",
            "Catalog",
        ]
        _shot(page, "overview")

        page.click("nav >> text=Log")
        assert page.locator("#log-rows tr").count() > 0
        first = page.locator("#log-rows tr").first.get_attribute("data-position")
        page.fill("input[name=category]", "order")
        page.click("button:has-text('Filter')")
        assert "category=order" in page.url
        assert page.locator("#log-rows tr").count() == 6
        with EventStore.open(sqlite_url) as store:  # the live tail brings what is appended
            done = store.append("order-9", [NewEvent("OrderPlaced", {"customer": "gus"})])
            store.append("payment-9", [NewEvent("PaymentTaken", {"cents": 1})])
        new_row = page.locator(f"#log-rows tr[data-position='{done.positions[0]}']")
        new_row.wait_for(timeout=15_000)
        assert page.locator("#log-rows tr").first.get_attribute("data-position") == str(
            done.positions[0]
        )
        assert page.locator("#log-rows >> text=PaymentTaken").count() == 0  # filtered out
        page.click("#tail-toggle")
        assert page.locator("#tail-state").inner_text() == "paused"
        _shot(page, "log")
        assert first is not None

        page.click("nav >> text=Streams")
        page.fill("input[name=prefix]", "order-")
        page.click("button:has-text('Search')")
        assert page.locator("#streams tbody tr").count() == 5  # order-9 too
        _shot(page, "streams")
        page.click("#streams >> text=order-1")
        assert page.locator("h1").inner_text() == "Stream order-1"
        _shot(page, "stream")

        page.locator("tr[data-position='3'] >> text=View").click()
        assert "OrderPaid" in page.locator("h1").inner_text()
        assert json.loads(page.locator("#data").inner_text()) == stored.data
        _shot(page, "event")
        with page.expect_download() as waited:
            page.click("#download")
        download = waited.value
        assert download.suggested_filename == "event-3.json"
        assert json.loads(Path(download.path()).read_text()) == event_document(stored)

        page.click("#trace-link")
        assert page.locator("#trace li").count() == 4
        _shot(page, "trace")

        page.click("nav >> text=Projections")
        _shot(page, "projections")
        page.click("#projections >> text=order-notes")
        assert page.locator("#error-store tbody tr").count() == 1
        _shot(page, "projection")
        page.locator(f"#error-store tr[data-position='{POISON_AT}'] >> text=View").click()
        assert "a negative amount" in page.locator("#parked-error").inner_text()
        _shot(page, "parked")

        page.click("nav >> text=Sagas")
        assert page.locator("#parked-sagas tbody tr").count() == 2
        _shot(page, "sagas")
        page.click("#parked-sagas >> text=payout p1")
        assert page.locator("#saga-status").inner_text() == "parked"
        assert page.locator("#timeline li").count() > 3
        _shot(page, "saga")

        page.click("nav >> text=Messaging")
        assert page.locator("h1").inner_text() == "Messaging"
        assert page.locator("#relays tbody tr").count() == 1  # "No relay has run on this store."
        _shot(page, "messaging")

        for label in ("Retry", "Discard", "Rebuild", "Resolve", "Cancel", "Resend"):
            assert page.locator(f"a.button:text-is('{label}')").count() == 0
        forged = page.request.post(
            served.url + f"/projections/order-notes/parked/{POISON_AT}/retry",
            form={"csrf": "forged", "attempts": "1"},
        )
        assert forged.status == 403
        page.goto(served.url + "/projections/order-notes")
        assert page.locator("#error-store tbody tr[data-position]").count() == 1


def test_the_catalog_and_an_event_read_by_the_apps_registry(page: Any, sqlite_url: str) -> None:
    with EventStore.open(sqlite_url) as store:
        catalog_app.fill(store)
    with serving("--store", sqlite_url, "--app", "tests.console.catalog_app:app") as served:
        page.goto(served.url + "/")
        page.click("nav >> text=Catalog")
        assert page.locator("h1").inner_text().startswith("Catalog")
        assert page.locator("#catalog tbody tr").count() == 4
        placed = page.locator("#catalog tr[data-type='OrderPlaced']")
        assert "v1: 1 v2: 2 v3: 1" in placed.inner_text()
        _shot(page, "catalog")

        page.click("#catalog >> text=OrderPlaced")
        assert page.locator("#stored tbody tr").count() == 3
        shown = json.loads(page.locator("#schema-2").inner_text())
        assert shown == catalog_app.OrderPlaced.model_json_schema()
        _shot(page, "catalog-type")

        page.locator(f"#stored a:text-is('{catalog_app.UPCAST}')").click()
        assert json.loads(page.locator("#typed").inner_text())["cents"] == 500
        assert json.loads(page.locator("#data").inner_text())["euros"] == 5
        _shot(page, "event-typed")


def test_retry_a_parked_event_and_resolve_a_parked_saga(page: Any, sqlite_url: str) -> None:
    with EventStore.open(sqlite_url) as store:
        fill_console(store)
    arguments = ("--store", sqlite_url, "--app", APP)
    with serving(*arguments, environment={HEALED: "1"}, allow_actions=True) as served:
        page.goto(served.url + f"/projections/order-notes/parked/{POISON_AT}")
        page.click("#retry")
        assert "Retry the event" in page.locator("h1").inner_text()
        _shot(page, "confirm")
        page.click("#confirm")
        assert "retried; 0 still parked" in page.locator(".message").inner_text()
        assert page.locator("#error-store >> text=Nothing parked.").count() == 1
        assert page.locator("#badge-failed").inner_text() == "2"

        page.goto(served.url + "/saga?name=payout&id=p1")
        page.click("#saga-resolve")
        page.fill("input[name=note]", "refunded by hand")
        page.click("#confirm")
        assert page.locator("#saga-status").inner_text() == "resolved"
        assert page.locator("#timeline >> text=refunded by hand").count() == 1
        _shot(page, "resolved")
    with EventStore.open(sqlite_url) as store:
        assert _notes(store)[POISON_AT] == -5  # the retried event reached the read model
        assert saga_operations.saga(store, shop, "payout", "p1").saga.status == "resolved"
