"""The console over a store URL that names each tenant's place with `{tenant}`: a tenant
picker at `/`, and each tenant's console under `/t/TENANT/`.

A tenant's pages are one store's console, mounted at its prefix: every link a page
writes begins with the prefix (`root` in the templates), and every page reads the store
of the tenant its prefix names, so no page of one tenant can show another's events.
The prefix is checked before anything is opened: a tenant id the store refuses, one
not among those the console shows, or one without a store is answered 404, with a page
that does not name it (an operator limited to some tenants learns nothing of others).
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send

from eventcraft import __version__
from eventcraft.eventstore import (
    EventStoreError,
    InvalidTenant,
    StoreUnavailable,
    Tenants,
    check_tenant,
)

from ..app import App
from ..operations import tenants as operations
from ..operations.errors import InputError, OperationError
from .rendering import Console, templates
from .security import HostNames
from .serving import STATIC, console_pages, guards

NO_SUCH_TENANT = "this console shows no such tenant: choose one from the list"
"""What a page of a tenant the console does not show says: never the tenant's name."""


class TenantConsoles:
    """The ASGI application mounted at `/t/{tenant}`: each tenant's console, made when its
    first page is asked for, once the tenant is one the console shows and has a store."""

    def __init__(
        self,
        tenants: Tenants,
        app: App,
        *,
        allow_actions: bool,
        hosts: HostNames,
        shown: frozenset[str] | None,
    ) -> None:
        self.tenants = tenants
        self.app = app
        self.allow_actions = allow_actions
        self.hosts = hosts
        self.shown = shown
        """The tenants the console may show; None: every tenant with a store."""
        self._csrf = secrets.token_urlsafe(32)
        self._consoles: dict[str, Starlette] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        tenant = str(scope.get("path_params", {}).get("tenant", ""))
        # Asked on every request, not once: a tenant dropped meanwhile (by another process)
        # is a 404, and its store is not opened again, which would make it anew.
        if not await run_in_threadpool(self.visible, tenant):
            root = str(scope.get("root_path", "")).removesuffix(f"/t/{tenant}")
            response = plain_page(
                Request(scope), "error.html", root, status_code=404, error=NO_SUCH_TENANT
            )
            await response(scope, receive, send)
            return
        pages = self._consoles.get(tenant)
        if pages is None:
            pages = self._consoles.setdefault(tenant, self._pages(tenant))
        await pages(scope, receive, send)

    def visible(self, tenant: str) -> bool:
        """Whether the console shows `tenant`: a tenant id, among those it may show, with a
        store (a console makes no tenant's store by being asked for its pages)."""
        try:
            check_tenant(tenant)
        except InvalidTenant:
            return False
        if self.shown is not None and tenant not in self.shown:
            return False
        return tenant in self.tenants.known()

    def listed(self) -> list[str]:
        """The tenants the picker lists: those with a store that the console shows."""
        return [t for t in self.tenants.known() if self.shown is None or t in self.shown]

    def _pages(self, tenant: str) -> Starlette:
        console = Console(
            self.tenants.for_tenant(tenant),
            operations.app_for_tenant(self.app, tenant),
            self.allow_actions,
            csrf=self._csrf,
            hosts=self.hosts,
            tenant=tenant,
        )
        return console_pages(console)


def tenant_consoles(
    template: str,
    app: App,
    *,
    allow_actions: bool,
    token: str | None,
    hosts: HostNames,
    shown: Iterable[str] | None,
) -> Starlette:
    """The console of the tenants of `template`: the picker, and each tenant's pages under
    `/t/TENANT/`; `shown` limits the tenants it shows."""
    chosen = None if shown is None else frozenset(operations.checked_tenants(shown))
    operations.app_for_tenant(app, "a")  # refused here if every tenant would share its database
    tenants = Tenants(template)  # UnsupportedStoreURL for a template that places no tenant
    consoles = TenantConsoles(tenants, app, allow_actions=allow_actions, hosts=hosts, shown=chosen)

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            tenants.close()

    def picker(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return plain_page(request, "tenants.html", root, tenants=consoles.listed())

    def failed(status_code: int) -> Any:
        def handler(request: Request, error: Exception) -> Response:
            root = request.scope.get("root_path", "")
            return plain_page(
                request, "error.html", root, status_code=status_code, error=str(error)
            )

        return handler

    starlette = Starlette(
        routes=[
            Route("/", picker, name="tenants"),
            Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
            Mount("/t/{tenant}", app=consoles),
        ],
        middleware=guards(hosts, token),
        exception_handlers={
            InputError: failed(400),
            StoreUnavailable: failed(503),
            OperationError: failed(409),
            EventStoreError: failed(409),
        },
        lifespan=lifespan,
    )
    starlette.state.tenants = consoles
    return starlette


class _Picker:
    """What the page frame reads of a console, for the pages above the tenants'."""

    tenant = None

    def __init__(self, allow_actions: bool) -> None:
        self.allow_actions = allow_actions


def plain_page(
    request: Request, template: str, root: str, *, status_code: int = 200, **context: Any
) -> HTMLResponse:
    """A page above the tenants' consoles (the picker, an unknown tenant's 404), `root`
    the picker's path: the frame without a store's navigation or badges."""
    consoles: TenantConsoles = request.app.state.tenants
    response: HTMLResponse = templates.TemplateResponse(
        request,
        template,
        {
            "console": _Picker(consoles.allow_actions),
            "root": root,
            "tenants_root": root,
            "navigation": (),
            "badges": None,
            "version": __version__,
            "message": None,
            **context,
        },
        status_code=status_code,
    )
    return response
