"""A projection's lag counts the events it would apply: on a log full of events it does
not read it is 0, and the console, `projections status` and the badges say so alike."""

from __future__ import annotations

import re

import orjson
import pytest
from eventcraft.eventstore import EventStore
from starlette.testclient import TestClient

from eventcraft.console import create_app
from eventcraft.operations import projections

from ..cli.conftest import Run
from .conftest import LOCAL
from .lag_app import NOISE, app, noise, wanted_events

APP = "tests.console.lag_app:app"


def _lags(store: EventStore) -> dict[str, tuple[int, bool]]:
    return {s.name: (s.lag_events, s.lag_seconds > 0) for s in projections.status(store, app)}


def test_a_projection_never_run_lags_only_by_the_events_it_reads(store: EventStore) -> None:
    noise(store)
    assert _lags(store) == {"wanted": (0, False), "kept": (0, False)}
    wanted_events(store, 3, kept=2)
    assert _lags(store) == {"wanted": (3, True), "kept": (2, True)}


def test_a_projection_lags_only_by_the_events_after_its_checkpoint_it_reads(
    store: EventStore,
) -> None:
    wanted_events(store, 1, kept=1)
    projections.catch_up(store, app)
    noise(store)
    assert _lags(store) == {"wanted": (0, False), "kept": (0, False)}
    assert store.high_water_mark() - projections.state(store, app, "wanted").position == NOISE
    wanted_events(store, 4, kept=1)
    noise(store)
    assert _lags(store) == {"wanted": (4, True), "kept": (1, True)}
    assert projections.lag(store, app) == 5
    projections.catch_up(store, app)
    assert _lags(store) == {"wanted": (0, False), "kept": (0, False)}


def test_a_lag_beyond_what_is_counted_says_at_least(
    store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from eventcraft.projections import status

    monkeypatch.setattr(status, "LAG_COUNTED", 3)
    noise(store)
    wanted_events(store, 4, kept=3)
    found = {s.name: (s.lag_events, s.lag_capped) for s in projections.status(store, app)}
    assert found == {"wanted": (3, True), "kept": (3, False)}
    with TestClient(create_app(store, app), base_url=LOCAL) as console:
        page = console.get("/projections/wanted").text
        assert _shown_lag(page).startswith("3+ events")
        assert _badge(page) == "6+"


def _shown_lag(page: str) -> str:
    found = re.search(r"<dt>lag</dt><dd>([^<]*)</dd>", page)
    assert found is not None, page
    return found.group(1)


def _badge(page: str) -> str:
    found = re.search(r'id="badge-waiting">([^<]*)<', page)
    assert found is not None
    return found.group(1)


def _waiting_rows(page: str) -> int:
    found = re.search(r'<tbody id="message-store">(.*?)</tbody>', page, re.S)
    assert found is not None
    return found.group(1).count("<tr")


def test_the_console_says_the_lag_and_nothing_waits_alike(store: EventStore) -> None:
    wanted_events(store, 1, kept=1)
    projections.catch_up(store, app)
    noise(store)
    with TestClient(create_app(store, app), base_url=LOCAL) as console:
        page = console.get("/projections/wanted").text
        assert _shown_lag(page).startswith("0 events, 0.0 s")
        assert "Nothing waits: the projection is current." in page
        assert _badge(page) == "0"
        listed = console.get("/projections").text
        assert re.search(r'data-name="wanted">.*?<td class="number">0</td>', listed)
        wanted_events(store, 3, kept=0)
        page = console.get("/projections/wanted").text
        assert _shown_lag(page).startswith("3 events")
        assert "Nothing waits" not in page
        assert _waiting_rows(page) == 3
        assert _badge(console.get("/").text) == "3"
        kept = console.get("/projections/kept").text
        assert _shown_lag(kept).startswith("0 events")
        assert "Nothing waits: the projection is current." in kept


def test_projections_status_says_the_lag_it_would_apply(shared_store_url: str, run: Run) -> None:
    with EventStore.open(shared_store_url) as store:
        noise(store)

    def status() -> dict[str, int]:
        found = run("--store", shared_store_url, "--app", APP, "projections", "status", "--json")
        assert found.code == 0, found.err
        return {s["name"]: s["lag_events"] for s in orjson.loads(found.out)}

    assert status() == {"wanted": 0, "kept": 0}
    with EventStore.open(shared_store_url) as store:
        wanted_events(store, 2, kept=1)
    assert status() == {"wanted": 2, "kept": 1}
