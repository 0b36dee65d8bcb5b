"""`create_app`: the console as an ASGI application, to serve (`eventcraft console`) or to
mount inside a service's own Starlette or FastAPI app.

    from eventcraft.console import create_app
    service.mount("/eventcraft", create_app(store, app))
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

from eventcraft.eventstore import EventStore, EventStoreError, StoreUnavailable

from ..app import App
from ..operations.errors import InputError, NotFound, OperationError
from ..operations.stores import open_store
from . import log_pages, messaging_pages, projection_pages, saga_pages
from .metrics import Metrics
from .rendering import Console, page
from .security import HostNames, Refused, SecurityHeaders, TokenRequired, TrustedHosts

STATIC = Path(__file__).with_name("static")


def create_app(
    store: EventStore | str,
    app: App | None = None,
    *,
    allow_actions: bool = False,
    token: str | None = None,
    metrics: bool = False,
    hosts: Iterable[str] | None = None,
) -> Starlette:
    """The console for `store` (an open store, or a URL it opens and closes with the
    app's lifespan) and the App whose projections and sagas it shows.

    Read-only unless `allow_actions`; with `token`, every request must carry it.
    With `metrics`, `/metrics` serves eventcraft's metrics to Prometheus (`metrics.py`).
    With `hosts` (`name`, any port, or `name:port`), a request for any other host name
    is answered 400 and an action's Origin must be one of them; without, the service the
    console is mounted in decides which names it answers for (`eventcraft console`
    always gives them).
    """
    if token is not None and not token:
        raise InputError("a console token must not be empty")
    names = HostNames(hosts) if hosts is not None else None
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

    middleware = [Middleware(SecurityHeaders)]
    if names is not None:
        # Before the token: a rebound name learns nothing, not even that a token is needed.
        middleware.append(Middleware(TrustedHosts, hosts=names))
    if token:
        middleware.append(Middleware(TokenRequired, token=token))
    routes = [
        *log_pages.ROUTES,
        *projection_pages.ROUTES,
        *saga_pages.ROUTES,
        *messaging_pages.ROUTES,
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
    ]
    if exposed is not None:
        routes.append(exposed.route())
    handlers = {
        Refused: _refused,
        NotFound: _failed(404),
        InputError: _failed(400),
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
