"""The Projections pages: each projection's state, and its three stores in the seed's
terms, the message log (what it reads, for audit), the message store (what waits after
its checkpoint) and the error store (its parked events); Retry, Discard and Rebuild."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse
from starlette.routing import Route

from ..operations import log, newest
from ..operations import projections as operations
from ..operations.errors import NotFound, Problems
from ..operations.numbers import MAX_AFTER
from .actions import checked_form, confirmation, done, unchanged
from .paging import link, number, page_size
from .rendering import console_of, page

SHOWN = 20
"""Events shown of a projection's message log and message store."""


def projections_page(request: Request) -> HTMLResponse:
    console = console_of(request)
    states = operations.status(console.store, console.app)
    return page(request, "projections.html", active="Projections", states=states)


def projection_page(request: Request) -> HTMLResponse:
    console = console_of(request)
    name = request.path_params["name"]
    found = operations.state(console.store, console.app, name)
    reads = operations.reads(console.app, name)
    # The error store is paged by position: a row more than the page says a next exists.
    after, limit = number(request, "after", least=0, most=MAX_AFTER), page_size(request)
    parked = operations.parked(console.store, console.app, name, after=after or 0, limit=limit + 1)
    return page(
        request,
        "projection.html",
        active="Projections",
        state=found,
        reads=reads,
        message_log=newest.log_page(console.store, limit=SHOWN, where=reads),
        message_store=operations.waiting(console.store, console.app, name, limit=SHOWN),
        error_store=parked[:limit],
        first=link(request, after=None) if after else None,
        next=link(request, after=parked[limit - 1].position) if len(parked) > limit else None,
        rebuild=console.rebuilds.latest.get(name),
    )


def parked_page(request: Request) -> HTMLResponse:
    console = console_of(request)
    name, position = request.path_params["name"], request.path_params["position"]
    parked = operations.parked_event(console.store, console.app, name, position)
    event = log.find_event(console.store, str(position))
    return page(request, "parked.html", active="Projections", parked=parked, event=event)


def retry_confirm(request: Request) -> HTMLResponse:
    return _settle_confirm(request, "retry")


def discard_confirm(request: Request) -> HTMLResponse:
    return _settle_confirm(request, "discard")


async def retry(request: Request) -> RedirectResponse:
    return await _settle(request, "retry")


async def discard(request: Request) -> RedirectResponse:
    return await _settle(request, "discard")


def rebuild_confirm(request: Request) -> HTMLResponse:
    console = console_of(request)
    found = operations.state(console.store, console.app, request.path_params["name"])
    return confirmation(
        request,
        title=f"Rebuild {found.name}",
        question=(
            f"Replay all {found.head} events of the log into new tables for {found.name!r}, "
            f"and swap them in for generation {found.generation}? "
            "The current tables serve queries until the swap."
        ),
        fields={"generation": found.generation},
        back=f"/projections/{found.name}",
    )


async def rebuild(request: Request) -> RedirectResponse:
    form = await checked_form(request)
    console = console_of(request)
    name = request.path_params["name"]
    found = await run_in_threadpool(operations.state, console.store, console.app, name)
    unchanged(form.get("generation"), found.generation, f"{name}'s serving generation")
    job = console.rebuilds.start(
        name,
        lambda told: operations.rebuild(console.store, console.app, name, progress=told),
    )
    if job is None:
        raise Problems(f"a rebuild of {name!r} is running already")
    return done(request, f"/projections/{name}", f"rebuild of {name} started")


def _settle_confirm(request: Request, action: str) -> HTMLResponse:
    console = console_of(request)
    name, position = request.path_params["name"], request.path_params["position"]
    parked = operations.parked_event(console.store, console.app, name, position)
    effect = (
        "apply it to the read model now (it stays parked if it fails again)"
        if action == "retry"
        else "forget it without applying it"
    )
    return confirmation(
        request,
        title=f"{action.capitalize()} the event at position {position}",
        question=f"{action.capitalize()} the {parked.type} event parked by {name!r}: {effect}?",
        fields={"attempts": parked.attempts},
        back=f"/projections/{name}/parked/{position}",
        parked=parked,
    )


async def _settle(request: Request, action: str) -> RedirectResponse:
    form = await checked_form(request)
    console = console_of(request)
    name, position = request.path_params["name"], request.path_params["position"]

    def act() -> operations.Settled:
        try:
            parked = operations.parked_event(console.store, console.app, name, position)
        except NotFound:
            raise Problems(
                f"the event at position {position} is no longer parked by {name!r} "
                "(retried or discarded meanwhile): nothing done"
            ) from None
        unchanged(form.get("attempts"), parked.attempts, "its attempts")
        settle = operations.retry_parked if action == "retry" else operations.discard_parked
        return settle(console.store, console.app, name, position)

    settled = await run_in_threadpool(act)
    return done(
        request,
        f"/projections/{name}",
        f"event {position} {settled.action}; {settled.parked_left} still parked",
    )


ROUTES = [
    Route("/projections", projections_page, name="projections"),
    Route("/projections/{name}", projection_page, name="projection"),
    Route("/projections/{name}/parked/{position:int}", parked_page, name="parked"),
    Route("/projections/{name}/parked/{position:int}/retry", retry_confirm, methods=["GET"]),
    Route("/projections/{name}/parked/{position:int}/retry", retry, methods=["POST"]),
    Route("/projections/{name}/parked/{position:int}/discard", discard_confirm, methods=["GET"]),
    Route("/projections/{name}/parked/{position:int}/discard", discard, methods=["POST"]),
    Route("/projections/{name}/rebuild", rebuild_confirm, methods=["GET"]),
    Route("/projections/{name}/rebuild", rebuild, methods=["POST"]),
]
