"""What every action of the console shares: a confirmation page (GET) that shows what
will be done to what, and a POST that is checked (read-only switch, origin, CSRF) and
re-checks the state the operator confirmed before it acts."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse

from ..operations.errors import Problems
from .rendering import console_of, page
from .security import Refused, check_action


def confirmation(
    request: Request,
    *,
    title: str,
    question: str,
    fields: dict[str, Any],
    back: str,
    **context: Any,
) -> HTMLResponse:
    """The page asking the operator to confirm an action, or to go `back` to the page it
    concerns; refused on a read-only console."""
    console = console_of(request)
    if not console.allow_actions:
        raise Refused(403, "this console is read-only: start it with --allow-actions to act")
    return page(
        request,
        "confirm.html",
        title=title,
        question=question,
        fields=fields,
        action=request.url.path,
        query=request.url.query,
        back=back,
        **context,
    )


async def checked_form(request: Request) -> FormData:
    """The action's form, once the POST may act at all."""
    console = console_of(request)
    form = await request.form()
    check_action(request, console.allow_actions, console.csrf, form.get("csrf"), console.hosts)
    return form


def unchanged(seen: object, now: object, what: str) -> None:
    """Refuse to act if what the operator confirmed has changed since."""
    if str(seen) != str(now):
        raise Problems(f"{what} changed since you confirmed ({seen} then, {now} now): nothing done")


def done(request: Request, location: str, message: str) -> RedirectResponse:
    """Back to the page the action concerns, saying what was done."""
    separator = "&" if "?" in location else "?"
    root = request.scope.get("root_path", "")
    return RedirectResponse(
        f"{root}{location}{separator}{urlencode({'message': message})}", status_code=303
    )
