"""The Catalog pages: the App's event types and the store's, each with what the store holds
of each version, who reads it, its upcasters and personal fields; one type's JSON Schemas.

Each parses the query, calls one function of `eventcraft.operations.catalog`, and renders.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route

from ..operations import catalog
from .paging import link, page_size
from .rendering import console_of, page


def catalog_page(request: Request) -> HTMLResponse:
    console = console_of(request)
    after = request.query_params.get("after") or None
    found = catalog.catalog_page(console.store, console.app, after=after, limit=page_size(request))
    return page(
        request,
        "catalog.html",
        active="Catalog",
        found=found,
        first=link(request, after=None) if after else None,
        next=None if found.next_after is None else link(request, after=found.next_after),
    )


def event_type_page(request: Request) -> HTMLResponse:
    console = console_of(request)
    entry = catalog.event_type(console.store, console.app, request.path_params["name"])
    registry = console.app.registry is not None
    return page(request, "catalog_type.html", active="Catalog", entry=entry, registry=registry)


ROUTES = [
    Route("/catalog", catalog_page, name="catalog"),
    # `:path`: an event type's name may hold a `/`, which its link encodes and the path holds.
    Route("/catalog/{name:path}", event_type_page, name="event_type"),
]
