"""Pages from templates: the Jinja2 environment shipped in the package, the filters the
templates use, and what every page is given (the console, its badges, the CSRF token)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import quote

import orjson
from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.templating import Jinja2Templates

from eventcraft import __version__
from eventcraft.eventstore import EventStore

from ..app import App
from ..operations import overview
from .flash import Flash
from .jobs import Rebuilds
from .security import HostNames

NAVIGATION = (
    ("Overview", "/"),
    ("Log", "/log"),
    ("Streams", "/streams"),
    ("Projections", "/projections"),
    ("Sagas", "/sagas"),
    ("Messaging", "/messaging"),
    ("Catalog", "/catalog"),
)
"""The pages every page links to, by their pinned labels."""


@dataclass
class Console:
    """What the running console serves: the store, the App, and what it may do."""

    store: EventStore
    app: App
    allow_actions: bool
    csrf: str
    hosts: HostNames | None = None
    """The host names it answers for; None when the service it is mounted in decides."""
    rebuilds: Rebuilds = field(default_factory=Rebuilds)
    flash: Flash = field(default_factory=Flash)
    """Signs the status line an action leaves, which pages show only signed."""
    tenant: str | None = None
    """The tenant whose store this is, in a console over tenants (served under
    `/t/TENANT/`); None for a console of one store."""


def pretty(value: Any) -> str:
    """JSON indented for reading, keys in the order they were stored."""
    return orjson.dumps(value, option=orjson.OPT_INDENT_2, default=str).decode()


def when(value: datetime | None) -> str:
    return "" if value is None else value.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def segment(value: object) -> str:
    """`value` as one segment of a link's path: every character but letters, digits and
    `-_.~` percent-encoded, `/` too (Jinja's `urlencode` keeps it, and `..` with it
    leads elsewhere)."""
    return quote(str(value), safe="")


def _environment() -> Environment:
    environment = Environment(
        loader=PackageLoader("eventcraft.console", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["pretty"] = pretty
    environment.filters["when"] = when
    environment.filters["segment"] = segment
    return environment


templates = Jinja2Templates(env=_environment())


def console_of(request: Request) -> Console:
    found: Console = request.app.state.console
    return found


def page(
    request: Request, template: str, *, status_code: int = 200, badges: bool = True, **context: Any
) -> HTMLResponse:
    """The template rendered for `request`, with the navigation and its badges."""
    console = console_of(request)
    root = request.scope.get("root_path", "")
    response: HTMLResponse = templates.TemplateResponse(
        request,
        template,
        {
            "console": console,
            "root": root,
            # A tenant's pages are under /t/TENANT/: the picker is above them.
            "tenants_root": root.removesuffix(f"/t/{console.tenant}") if console.tenant else "",
            "navigation": NAVIGATION,
            "badges": overview.badges(console.store, console.app) if badges else None,
            "version": __version__,
            "message": console.flash.said(request.query_params),
            **context,
        },
        status_code=status_code,
    )
    return response
