"""One store's console as an ASGI application: its pages, the errors they answer with, and
the middleware every request passes (`create_app` serves it alone, `tenant_pages` one per
tenant)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles
from starlette.types import Lifespan

from eventcraft.eventstore import EventStoreError, InvalidEvent, StoreUnavailable

from ..operations.errors import InputError, NotFound, OperationError
from . import catalog_pages, log_pages, messaging_pages, projection_pages, saga_pages
from .metrics import Metrics
from .rendering import Console, page
from .security import HostNames, Refused, SecurityHeaders, TokenRequired, TrustedHosts

STATIC = Path(__file__).with_name("static")


def guards(names: HostNames, token: str | None) -> list[Middleware]:
    """The middleware every request passes: the security headers, the host names it
    answers for, then the token if there is one."""
    # Hosts before the token: a rebound name learns nothing, not even that a token is needed.
    middleware = [Middleware(SecurityHeaders), Middleware(TrustedHosts, hosts=names)]
    if token:
        middleware.append(Middleware(TokenRequired, token=token))
    return middleware


def console_pages(
    console: Console,
    *,
    middleware: Sequence[Middleware] = (),
    lifespan: Lifespan[Starlette] | None = None,
    metrics: Metrics | None = None,
) -> Starlette:
    """The pages of one store's console, `console` in the application's state."""
    routes = [
        *log_pages.ROUTES,
        *projection_pages.ROUTES,
        *saga_pages.ROUTES,
        *messaging_pages.ROUTES,
        *catalog_pages.ROUTES,
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
    ]
    if metrics is not None:
        routes.append(metrics.route())
    starlette = Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers=HANDLERS,
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


# Bad input is 400: what the console refuses to take, and what the store refuses to
# hold (a NUL in a note, a name too long), which it names as InvalidEvent. A conflict
# with the state now (changed since confirmed, an id already stored) is 409. Handlers
# are looked up along the error's classes, so InvalidEvent is found before its
# EventStoreError.
HANDLERS: dict[Any, Callable[[Request, Exception], Response]] = {
    Refused: _refused,
    NotFound: _failed(404),
    InputError: _failed(400),
    InvalidEvent: _failed(400),
    StoreUnavailable: _failed(503),
    OperationError: _failed(409),
    EventStoreError: _failed(409),
}
