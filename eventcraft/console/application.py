"""`create_app`: the console as an ASGI application, to serve (`eventcraft console`) or to
mount inside a service's own Starlette or FastAPI app.

    from eventcraft.console import create_app
    service.mount("/eventcraft", create_app(store, app, hosts=["ops.example.com"]))

It answers only the host names it is given, the loopback ones if none are.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from pathlib import Path

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles

from eventcraft.eventstore import EventStore, EventStoreError, InvalidEvent, StoreUnavailable

from ..app import App
from ..operations.errors import InputError, NotFound, OperationError
from ..operations.stores import open_store
from . import catalog_pages, log_pages, messaging_pages, projection_pages, saga_pages
from .metrics import Metrics
from .rendering import Console, page
from .security import (
    LOOPBACK,
    HostNames,
    Refused,
    SecurityHeaders,
    TokenRequired,
    TrustedHosts,
)

STATIC = Path(__file__).with_name("static")


def create_app(
    store: EventStore | str,
    app: App | None = None,
    *,
    allow_actions: bool = False,
    token: str | None = None,
    metrics: bool = False,
    hosts: Iterable[str] | None = None,
    insecure_no_token: bool = False,
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

    # Hosts before the token: a rebound name learns nothing, not even that a token is needed.
    middleware = [Middleware(SecurityHeaders), Middleware(TrustedHosts, hosts=names)]
    if token:
        middleware.append(Middleware(TokenRequired, token=token))
    routes = [
        *log_pages.ROUTES,
        *projection_pages.ROUTES,
        *saga_pages.ROUTES,
        *messaging_pages.ROUTES,
        *catalog_pages.ROUTES,
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
    ]
    if exposed is not None:
        routes.append(exposed.route())
    # Bad input is 400: what the console refuses to take, and what the store refuses to
    # hold (a NUL in a note, a name too long), which it names as InvalidEvent. A conflict
    # with the state now (changed since confirmed, an id already stored) is 409. Handlers
    # are looked up along the error's classes, so InvalidEvent is found before its
    # EventStoreError.
    handlers = {
        Refused: _refused,
        NotFound: _failed(404),
        InputError: _failed(400),
        InvalidEvent: _failed(400),
        StoreUnavailable: _failed(503),
        OperationError: _failed(409),
        EventStoreError: _failed(409),
    }
    starlette = Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers=handlers,
        lifespan=lifespan,
    )
    starlette.state.console = console
    return starlette


def _refused(request: Request, error: Exception) -> Response:
    assert isinstance(error, Refused)
    return page(
        request, "error.html", status_code=error.status_code, badges=False, error=error.reason
    )


def _failed(status_code: int) -> Callable[[Request, Exception], Response]:
    def handler(request: Request, error: Exception) -> Response:
        return page(request, "error.html", status_code=status_code, badges=False, error=str(error))

    return handler
