"""The Messaging page: the relays (where each stands, paused or running, its lag) and the
inboxes' error store (messages that could not be stored), with View, Download, Resend and
Discard; the messages discarded are kept, and listed with `?failed=discarded`."""

from __future__ import annotations

from urllib.parse import urlencode

import orjson
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import ImmutableMultiDict
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from ..operations import messaging as operations
from ..operations.errors import InputError, NotFound
from .actions import checked_form, confirmation, done, unchanged
from .paging import link, page_size
from .rendering import console_of, page

ACTIONS = {
    "resend": "Ask the running inbox to store it again",
    "discard": "Discard it: it is never stored, and stays listed under discarded",
}

LISTS = ("waiting", "discarded")
"""What the error store's table lists (`?failed=`): the messages waiting to be settled,
or those discarded."""


def messaging_page(request: Request) -> HTMLResponse:
    console = console_of(request)
    listed = request.query_params.get("failed") or "waiting"
    if listed not in LISTS:
        raise InputError(f"no list of failed messages {listed!r} (there are: {', '.join(LISTS)})")
    after = _cursor(request.query_params.get("after"))
    found = operations.failed_page(
        console.store, discarded=listed == "discarded", after=after, limit=page_size(request)
    )
    following = found.next_after
    return page(
        request,
        "messaging.html",
        active="Messaging",
        relays=operations.relays(console.store),
        failed=found.messages,
        listed=listed,
        lists=LISTS,
        first=link(request, after=None) if after else None,
        next=None if following is None else link(request, after=orjson.dumps(following).decode()),
    )


def _cursor(text: str | None) -> operations.Cursor | None:
    """The message a page starts after, as the Next link wrote it: `[inbox, time, id]`."""
    if not text:
        return None
    try:
        inbox, failed_at, message_id = orjson.loads(text)
    except (orjson.JSONDecodeError, TypeError, ValueError):
        inbox = None
    if not (isinstance(inbox, str) and isinstance(message_id, str)) or not isinstance(
        failed_at, int | float
    ):
        raise InputError(f"after must be a page's end as a Next link gives it, not {text!r:.60}")
    return inbox, float(failed_at), message_id


def failed_page(request: Request) -> HTMLResponse:
    console = console_of(request)
    inbox, message_id = _named(request.query_params)
    found = operations.failed_message(console.store, inbox, message_id)
    # Not `message`: every page shows that as the status line an action left.
    return page(request, "inbox_failed.html", active="Messaging", failed=found)


def download(request: Request) -> Response:
    """The message's body as it arrived, to keep or to send again by hand."""
    console = console_of(request)
    inbox, message_id = _named(request.query_params)
    body = operations.failed_body(console.store, inbox, message_id)
    filename = f"{inbox}-{message_id or 'no-id'}.body"
    return Response(
        body,
        media_type="application/octet-stream",
        headers={"Content-Disposition": f'attachment; filename="{_safe(filename)}"'},
    )


def action_confirm(request: Request) -> HTMLResponse:
    console = console_of(request)
    action = _action(request)
    inbox, message_id = _named(request.query_params)
    message = operations.to_settle(console.store, inbox, message_id)
    return confirmation(
        request,
        title=f"{action.capitalize()} message {message_id} of inbox {inbox}",
        question=f"{ACTIONS[action]}?",
        fields={"inbox": inbox, "id": message_id, "attempts": message.attempts},
        back=f"/messaging/failed?{urlencode({'inbox': inbox, 'id': message_id})}",
        # The reason is kept with the discarded message, as `discard --reason` keeps it.
        note=action == "discard",
        note_label="reason",
        note_optional=True,
    )


async def act(request: Request) -> RedirectResponse:
    form = await checked_form(request)
    console = console_of(request)
    action = _action(request)
    inbox, message_id = _named(form)

    def run() -> str:
        # Still failed as the operator saw it: not settled, no attempt of the inbox since.
        now = operations.to_settle(console.store, inbox, message_id)
        unchanged(form.get("attempts"), now.attempts, f"message {message_id}'s attempts")
        if action == "resend":
            operations.resend(console.store, inbox, message_id)
            return f"resend: message {message_id} goes to inbox {inbox} again"
        operations.discard(console.store, inbox, message_id, str(form.get("note") or ""))
        return f"discard: message {message_id} of inbox {inbox} is discarded, kept under discarded"

    said = await run_in_threadpool(run)
    return done(request, "/messaging", said)


def _action(request: Request) -> str:
    action = str(request.path_params["action"])
    if action not in ACTIONS:
        raise NotFound(f"no message action {action!r} (there are: {', '.join(ACTIONS)})")
    return action


def _named(params: ImmutableMultiDict[str, object]) -> tuple[str, str]:
    inbox = str(params.get("inbox") or "")
    if not inbox or "id" not in params:
        raise InputError("name the message: ?inbox=INBOX&id=MESSAGE_ID")
    return inbox, str(params.get("id") or "")


def _safe(filename: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in filename)


ROUTES = [
    Route("/messaging", messaging_page, name="messaging"),
    Route("/messaging/failed", failed_page, name="inbox_failed"),
    Route("/messaging/failed/download", download),
    Route("/messaging/failed/{action:str}", action_confirm, methods=["GET"]),
    Route("/messaging/failed/{action:str}", act, methods=["POST"]),
]
