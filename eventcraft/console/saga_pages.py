"""The Sagas pages: instances by name and status, one instance's transitions as a
timeline (attempts, idempotency keys, errors, results), and Retry, Resolve (with a note)
Compensate and Cancel; a parked bug's traceback."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import ImmutableMultiDict
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse
from starlette.routing import Route

from ..operations import sagas as operations
from ..operations.errors import InputError, NotFound
from .actions import checked_form, confirmation, done, unchanged
from .paging import PAGE, link, page_size
from .rendering import console_of, page

ACTIONS = {
    "retry": ("parked", "Run it again from where it stopped (the step, or its compensations)"),
    "compensate": ("parked", "Undo what its steps did"),
    "resolve": ("parked", "Mark it settled by hand; nothing runs for it again"),
    "cancel": ("running", "Stop it: it fails, and the orchestrators compensate what it did"),
}
"""Each action, the status it acts on, and what it does."""


def sagas_page(request: Request) -> HTMLResponse:
    """The parked instances (a page of them: more are listed with `status=parked`), and a
    page of instances by name and status, after the stream `after`."""
    console = console_of(request)
    name = request.query_params.get("name") or None
    status = request.query_params.get("status") or None
    after = request.query_params.get("after") or None
    found = operations.instances_page(
        console.store, console.app, status=status, name=name, after=after, limit=page_size(request)
    )
    parked = operations.parked(console.store, console.app, limit=PAGE + 1)
    return page(
        request,
        "sagas.html",
        active="Sagas",
        found=found,
        parked=parked[:PAGE],
        more_parked=len(parked) > PAGE,
        name=name or "",
        status=status or "",
        statuses=operations.STATUSES,
        first=link(request, after=None) if after else None,
        next=None if found.next_after is None else link(request, after=found.next_after),
    )


def saga_page(request: Request) -> HTMLResponse:
    console = console_of(request)
    name, saga_id = _named(request.query_params)
    found = operations.saga(console.store, console.app, name, saga_id)
    return page(request, "saga.html", active="Sagas", detail=found, actions=ACTIONS)


def action_confirm(request: Request) -> HTMLResponse:
    console = console_of(request)
    action, (status, effect) = _action(request)
    name, saga_id = _named(request.query_params)
    found = operations.expect(console.store, console.app, name, saga_id, status)
    return confirmation(
        request,
        title=f"{action.capitalize()} {found.stream_id}",
        question=f"{effect}?",
        fields={"name": name, "id": saga_id, "version": found.version},
        back=f"/saga?{urlencode({'name': name, 'id': saga_id})}",
        note=action != "retry",
        note_label="note" if action == "resolve" else "reason",
    )


async def act(request: Request) -> RedirectResponse:
    form = await checked_form(request)
    console = console_of(request)
    action, (status, _) = _action(request)
    name, saga_id = _named(form)
    note = str(form.get("note") or "")

    def run() -> operations.SagaSummary:
        # The instance must still be as the operator saw it when confirming.
        found = operations.expect(console.store, console.app, name, saga_id, status)
        unchanged(form.get("version"), found.version, f"{found.stream_id}'s version")
        if action == "retry":
            return operations.retry(console.store, console.app, name, saga_id)
        if action == "resolve":
            return operations.resolve(console.store, console.app, name, saga_id, note)
        if action == "compensate":
            return operations.compensate(console.store, console.app, name, saga_id, note)
        if not note.strip():
            raise InputError("a cancellation needs a reason")
        return operations.cancel(console.store, console.app, name, saga_id, note)

    after = await run_in_threadpool(run)
    location = f"/saga?{urlencode({'name': name, 'id': saga_id})}"
    return done(request, location, f"{action}: {after.stream_id} is {after.status}")


def _action(request: Request) -> tuple[str, tuple[str, str]]:
    action = request.path_params["action"]
    if action not in ACTIONS:
        raise NotFound(f"no saga action {action!r} (there are: {', '.join(ACTIONS)})")
    return action, ACTIONS[action]


def _named(params: ImmutableMultiDict[str, Any]) -> tuple[str, str]:
    name, saga_id = str(params.get("name") or ""), str(params.get("id") or "")
    if not name or not saga_id:
        raise InputError("name the instance: ?name=SAGA&id=ID")
    return name, saga_id


ROUTES = [
    Route("/sagas", sagas_page, name="sagas"),
    Route("/saga", saga_page, name="saga"),
    Route("/saga/{action:str}", action_confirm, methods=["GET"]),
    Route("/saga/{action:str}", act, methods=["POST"]),
]
