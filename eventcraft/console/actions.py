"""What every action of the console shares: a confirmation page (GET) that shows what
will be done to what, and a POST that is checked (read-only switch, origin, CSRF) and
re-checks the state the operator confirmed before it acts."""

from __future__ import annotations

from typing import Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse

from ..operations.errors import InputError, Problems
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
    """Refuse to act if what the operator confirmed has changed since (`Problems`: a
    conflict with the state now), or if the form does not say what was confirmed as its
    confirmation page does (`InputError`: bad input, which no page sends)."""
    if not isinstance(seen, str) or not seen.strip():
        raise InputError(
            f"the form does not give {what} as you confirmed it: confirm again from its page"
        )
    if isinstance(now, int):
        # A version or count, as the page wrote it: digits, no more than 2**63 holds.
        if not (seen.isascii() and seen.isdigit() and len(seen) <= 19):
            raise InputError(
                f"the form gives {what} as {seen!r:.40}, which is no whole number a "
                "confirmation page sends"
            )
        same = int(seen) == now
    else:
        same = seen == str(now)
    if not same:
        raise Problems(f"{what} changed since you confirmed ({seen} then, {now} now): nothing done")


def done(request: Request, location: str, message: str) -> RedirectResponse:
    """Back to the page the action concerns, saying what was done (signed: pages show
    no message the console did not sign)."""
    separator = "&" if "?" in location else "?"
    root = request.scope.get("root_path", "")
    signed = console_of(request).flash.query(message)
    return RedirectResponse(f"{root}{location}{separator}{signed}", status_code=303)
