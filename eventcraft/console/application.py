"""`create_app`: the console as an ASGI application, to serve (`eventcraft console`) or to
mount inside a service's own Starlette or FastAPI app.

    from eventcraft.console import create_app
    service.mount("/eventcraft", create_app(store, app, hosts=["ops.example.com"]))

It answers only the host names it is given, the loopback ones if none are.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager

from starlette.applications import Starlette

from eventcraft.eventstore import EventStore, redacted

from ..app import App
from ..operations import tenants
from ..operations.errors import InputError
from ..operations.stores import open_store
from . import tenant_pages
from .metrics import Metrics
from .rendering import Console
from .security import LOOPBACK, HostNames
from .serving import console_pages, guards


def create_app(
    store: EventStore | str,
    app: App | None = None,
    *,
    allow_actions: bool = False,
    token: str | None = None,
    metrics: bool = False,
    hosts: Iterable[str] | None = None,
    insecure_no_token: bool = False,
    shown_tenants: Iterable[str] | None = None,
) -> Starlette:
    """The console for `store` (an open store, or a URL it opens and closes with the
    app's lifespan) and the App whose projections and sagas it shows.

    Read-only unless `allow_actions`; with `token`, every request must carry it.
    With `metrics`, `/metrics` serves eventcraft's metrics to Prometheus (`metrics.py`).
    It answers requests for the names in `hosts` alone (`name`, any port, or
    `name:port`; by default `security.LOOPBACK`: localhost, 127.0.0.1 and [::1]):
    any other Host is answered 400, and an action's Origin must be one of them. A
    service that serves it by other names lists them all, loopback ones included
    if wanted: the default guards a mounted console against DNS rebinding.

    A store URL with `{tenant}` (`sqlite:///tenants/{tenant}.db`) serves its tenants: a
    tenant picker at `/`, and each tenant's pages under `/t/TENANT/`, every one of them
    scoped to that tenant's store. `shown_tenants` limits the tenants shown: a page of
    any other tenant, or of one that has no store, is 404 and does not name it.

    Actions on a console answering any name beyond loopback need `token`: without
    one, anyone who reaches it (sending a name it answers as the Host) could act,
    and `InputError` says so, unless `insecure_no_token` is given.

    Example::

        from eventcraft import App
        from eventcraft.console import create_app
        from eventcraft.eventstore import EventStore, NewEvent
        from starlette.testclient import TestClient

        app = App(store="sqlite:///shop.db")
        store = EventStore.open(app.store)
        store.append("order-7", [NewEvent("OrderPlaced", {"customer": "ann", "cents": 1200})])
        console = create_app(store, app)  # read-only; it answers the loopback names alone
        with TestClient(console, base_url="http://localhost") as browser:
            page = browser.get("/log?category=order")
            assert page.status_code == 200 and "OrderPlaced" in page.text
            assert browser.get("/events/1/download").json()["data"]["customer"] == "ann"
            assert browser.get("/", headers={"Host": "evil.example"}).status_code == 400
    """
    if token is not None and not token:
        raise InputError("a console token must not be empty")
    names = HostNames(LOOPBACK if hosts is None else hosts)
    beyond = names.beyond_loopback()
    if allow_actions and not token and beyond and not insecure_no_token:
        raise InputError(
            f"a console that allows actions and answers {beyond[0]!r}, a name beyond "
            "loopback, needs a token: give token=..., or insecure_no_token=True to let "
            "anyone who reaches it act"
        )
    service = app if app is not None else App()
    if isinstance(store, str) and tenants.is_template(store) and not tenants.tenant_option(store):
        if metrics:
            raise InputError(
                "metrics are served for one store: open one tenant's console (?tenant= in "
                "the URL, --tenant on the command line) to serve its metrics"
            )
        return tenant_pages.tenant_consoles(
            store,
            service,
            allow_actions=allow_actions,
            token=token,
            hosts=names,
            shown=shown_tenants,
        )
    if shown_tenants is not None:
        raise InputError(
            "the tenants a console shows are chosen among those of a store URL with {tenant} "
            f"(sqlite:///tenants/{{tenant}}.db), not of {redacted(str(store))!r}"
        )
    owned = isinstance(store, str)
    opened = open_store(store) if isinstance(store, str) else store
    console = Console(opened, service, allow_actions, csrf=secrets.token_urlsafe(32), hosts=names)
    exposed = Metrics(opened, service) if metrics else None

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if exposed is not None:
                exposed.close()
            if owned:
                opened.close()

    return console_pages(
        console, middleware=guards(names, token), lifespan=lifespan, metrics=exposed
    )
