"""The console's actions, on memory, SQLite and PostgreSQL: offered and done only with
`allow_actions`, each a confirmed POST carrying the CSRF token, re-checking the state
the operator confirmed before it acts; and the token that guards every request."""

from __future__ import annotations

import html
import re
import threading
import time
from collections.abc import Callable

import pytest
from eventcraft.eventstore import EventStore
from starlette.testclient import TestClient

from eventcraft.console import create_app
from eventcraft.operations import InputError
from eventcraft.operations import projections as projection_operations
from eventcraft.operations import sagas as saga_operations

from ..cli.apps import HEALED, shop
from ..cli.test_projections import _notes
from .conftest import LOCAL, POISON_AT, Client

RETRY = f"/projections/order-notes/parked/{POISON_AT}/retry"


def _form(console: TestClient, path: str) -> dict[str, str]:
    """The confirmation page's form fields, as the browser would post them."""
    page = console.get(path)
    assert page.status_code == 200, page.text
    fields = re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', page.text)
    return {name: html.unescape(value) for name, value in fields}


def test_a_read_only_console_offers_no_action_and_refuses_a_forged_post(client: Client) -> None:
    console = client()
    for path in [
        "/projections/order-notes",
        f"/projections/order-notes/parked/{POISON_AT}",
        "/saga?name=payout&id=p1",
        "/saga?name=delivery&id=d1",
    ]:
        page = console.get(path).text
        for label in (">Retry<", ">Discard<", ">Rebuild<", ">Resolve<", ">Cancel<"):
            assert label not in page, (path, label)
    assert console.get(RETRY).status_code == 403
    forged = console.post(RETRY, data={"csrf": "guessed", "attempts": "1"})
    assert forged.status_code == 403
    assert "read-only" in forged.text
    assert console.post("/saga/resolve", data={"name": "payout", "id": "p1"}).status_code == 403
    assert "1 parked events" in console.get("/").text  # nothing was done


def test_an_action_without_the_csrf_token_or_from_another_origin_is_refused(
    client: Client,
) -> None:
    console = client(allow_actions=True)
    fields = _form(console, RETRY)
    assert console.post(RETRY, data={**fields, "csrf": "forged"}).status_code == 403
    assert console.post(RETRY, data={"attempts": fields["attempts"]}).status_code == 403
    other = console.post(RETRY, data=fields, headers={"Origin": "http://evil.example"})
    assert other.status_code == 403 and "another origin" in other.text


def test_a_retried_parked_event_leaves_the_error_store_and_reaches_the_read_model(
    client: Client, shop_store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    console = client(allow_actions=True)
    page = console.get(f"/projections/order-notes/parked/{POISON_AT}").text
    assert f'href="{RETRY}"' in page
    confirm = console.get(RETRY).text
    assert f'id="back" href="/projections/order-notes/parked/{POISON_AT}"' in confirm
    fields = _form(console, RETRY)
    monkeypatch.setenv(HEALED, "1")
    done = console.post(RETRY, data=fields, follow_redirects=False)
    assert done.status_code == 303
    after = console.get(done.headers["location"]).text
    assert f"event {POISON_AT} retried; 0 still parked" in html.unescape(after)
    error_store = after[after.index('id="error-store"') : after.index('id="message-store"')]
    assert "Nothing parked." in error_store
    assert _notes(shop_store)[POISON_AT] == -5


def test_a_failing_retry_keeps_the_event_parked(client: Client, shop_store: EventStore) -> None:
    console = client(allow_actions=True)
    response = console.post(RETRY, data=_form(console, RETRY))
    assert response.status_code == 409
    assert "failed again, and stays parked" in html.unescape(response.text)
    assert projection_operations.parked(shop_store, shop, "order-notes")


def test_an_action_on_what_changed_since_it_was_confirmed_does_nothing(
    client: Client, shop_store: EventStore
) -> None:
    console = client(allow_actions=True)
    fields = _form(console, f"/projections/order-notes/parked/{POISON_AT}/discard")
    projection_operations.discard_parked(shop_store, shop, "order-notes", POISON_AT)
    gone = console.post(f"/projections/order-notes/parked/{POISON_AT}/discard", data=fields)
    assert gone.status_code == 409 and "no longer parked" in gone.text
    resolve = _form(console, "/saga/resolve?name=payout&id=p2")
    saga_operations.resolve(shop_store, shop, "payout", "p2", "settled by phone")
    again = console.post("/saga/resolve", data={**resolve, "note": "twice"})
    assert again.status_code == 409
    assert "saga-payout:p2 is resolved, not parked" in again.text


def test_invalid_input_in_an_action_form_is_400_and_does_nothing(
    client: Client, shop_store: EventStore
) -> None:
    """What no confirmation page sends, and what the store refuses to hold, is bad input
    (400); a form that was right when confirmed and no longer is, a conflict (409)."""
    console = client(allow_actions=True)
    discard = f"/projections/order-notes/parked/{POISON_AT}/discard"
    fields = _form(console, discard)
    for attempts in ("", "many", "-1", "9" * 30, None):
        sent = {k: v for k, v in fields.items() if k != "attempts"}
        if attempts is not None:
            sent["attempts"] = attempts
        refused = console.post(discard, data=sent)
        assert refused.status_code == 400, (attempts, refused.text)
        assert "attempts" in html.unescape(refused.text)
    resolve = _form(console, "/saga/resolve?name=payout&id=p1")
    for note in ("paid\x00back", "x" * (4 * 1024 * 1024 + 1)):
        refused = console.post("/saga/resolve", data={**resolve, "note": note})
        assert refused.status_code == 400, refused.text[:300]
        assert "Traceback" not in refused.text
    assert "NUL" in console.post("/saga/resolve", data={**resolve, "note": "a\x00"}).text
    assert saga_operations.saga(shop_store, shop, "payout", "p1").saga.status == "parked"
    assert projection_operations.parked(shop_store, shop, "order-notes")  # nothing done
    stale = console.post(discard, data={**fields, "attempts": str(int(fields["attempts"]) + 1)})
    assert stale.status_code == 409 and "changed since you confirmed" in stale.text


def test_a_discarded_parked_event_is_forgotten_unapplied(
    client: Client, shop_store: EventStore
) -> None:
    console = client(allow_actions=True)
    path = f"/projections/order-notes/parked/{POISON_AT}/discard"
    done = console.post(path, data=_form(console, path))
    assert "discarded; 0 still parked" in html.unescape(done.text)
    assert POISON_AT not in _notes(shop_store)


def test_a_parked_saga_is_resolved_with_a_note_and_a_running_one_cancelled(
    client: Client, shop_store: EventStore
) -> None:
    console = client(allow_actions=True)
    fields = _form(console, "/saga/resolve?name=payout&id=p1")
    seen = saga_operations.saga(shop_store, shop, "payout", "p1").saga
    assert fields["version"] == str(seen.version)
    missing = console.post("/saga/resolve", data=fields)
    assert missing.status_code == 400 and "needs a note" in missing.text
    done = console.post("/saga/resolve", data={**fields, "note": "refunded by hand"})
    assert "resolve: saga-payout:p1 is resolved" in html.unescape(done.text)
    assert "refunded by hand" in done.text  # the timeline shows the note
    cancel = _form(console, "/saga/cancel?name=delivery&id=d1")
    done = console.post("/saga/cancel", data={**cancel, "note": "customer left"})
    assert done.status_code == 200
    assert saga_operations.saga(shop_store, shop, "delivery", "d1").saga.status != "running"
    assert console.get("/saga/cancel?name=payout&id=p2").status_code == 409  # parked, not running


def test_a_parked_saga_retried_while_still_failing_is_parked_again(client: Client) -> None:
    console = client(allow_actions=True)
    response = console.post("/saga/retry", data=_form(console, "/saga/retry?name=payout&id=p1"))
    assert response.status_code == 409 and "parked again" in response.text


def test_a_rebuild_runs_in_the_background_and_shows_its_progress(
    client: Client, shop_store: EventStore
) -> None:
    console = client(allow_actions=True)
    before = projection_operations.state(shop_store, shop, "orders").generation
    fields = _form(console, "/projections/orders/rebuild")
    assert console.post("/projections/orders/rebuild", data=fields).status_code == 200
    deadline = time.monotonic() + 30
    while 'id="rebuild-done"' not in (page := console.get("/projections/orders").text):
        assert time.monotonic() < deadline, "the rebuild did not finish in 30 s"
        assert "Failed" not in page
        time.sleep(0.05)
    assert projection_operations.state(shop_store, shop, "orders").generation == before + 1
    stale = console.post("/projections/orders/rebuild", data=fields)
    assert stale.status_code == 409 and "changed since you confirmed" in stale.text


def test_with_a_token_every_request_needs_it(shop_store: EventStore) -> None:
    with TestClient(create_app(shop_store, shop, token="s3cret"), base_url=LOCAL) as console:
        assert console.get("/").status_code == 401
        assert console.get("/static/console.css").status_code == 401
        assert console.get("/", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert console.get("/", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        entry = console.get("/log?token=s3cret&category=order", follow_redirects=False)
        assert entry.status_code == 303 and entry.headers["location"] == "/log?category=order"
        assert console.get("/log").status_code == 200  # the cookie it set
    with pytest.raises(InputError, match="must not be empty"):
        create_app(shop_store, shop, token="")


def test_a_console_mounted_in_a_service_links_under_its_prefix(shop_store: EventStore) -> None:
    from starlette.applications import Starlette
    from starlette.routing import Mount

    service = Starlette(routes=[Mount("/ops", app=create_app(shop_store, shop))])
    with TestClient(service, base_url=LOCAL) as console:
        page = console.get("/ops/log").text
        assert 'href="/ops/events/1"' in page and 'href="/ops/static/console.css"' in page
        assert console.get("/ops/static/console.css").status_code == 200
        assert console.get("/ops/events/1/download").json()["position"] == 1


def test_a_rebuild_tells_its_progress_up_to_the_head(shop_store: EventStore) -> None:
    told: list[tuple[int, int]] = []

    def progress(position: int, target: int) -> None:
        told.append((position, target))

    done = projection_operations.rebuild(shop_store, shop, "orders", progress=progress)
    head = shop_store.high_water_mark()
    assert told and told[-1] == (head, head)
    assert [position for position, _ in told] == sorted(position for position, _ in told)
    assert done.position == head


def test_one_rebuild_of_a_projection_runs_at_a_time() -> None:
    from eventcraft.console.jobs import Rebuilds
    from eventcraft.operations.projections import Rebuilt

    jobs = Rebuilds()
    release = threading.Event()

    def slow(told: Callable[[int, int], None]) -> Rebuilt:
        told(5, 10)
        release.wait(30)
        return Rebuilt("orders", 2, 10, 10, 0.1)

    first = jobs.start("orders", slow)
    assert first is not None
    deadline = time.monotonic() + 10
    while first.position != 5:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert (first.running, first.percent) == (True, 50)
    assert jobs.start("orders", slow) is None  # refused while the first runs
    assert jobs.start("order-notes", lambda told: Rebuilt("order-notes", 2, 1, 1, 0.0))
    release.set()
    while first.running:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert first.result is not None and first.percent == 100
    assert jobs.start("orders", slow) is not None  # free again
