"""Who may see the console and who may act through it: the host names it answers for,
the token, the read-only switch, and the CSRF check every action's POST passes.

A request naming another host is refused before any route runs: a DNS rebinding
points an attacker's name at 127.0.0.1, and the browser then treats the console's
pages as the attacker's own origin (reads them, CSRF token and all); only the Host
header still tells them apart. A console given no names answers the loopback ones.

The token is accepted as `Authorization: Bearer TOKEN`, as a cookie, or once
as `?token=TOKEN`, which sets the cookie and redirects to the same page
without it (so it leaves the address bar and the history). The CSRF token is
a secret of the running console, put in each action's form: a page of
another origin cannot read it, so it cannot forge the POST.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterable
from urllib.parse import urlencode, urlsplit

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..operations.errors import InputError

TOKEN_COOKIE = "eventcraft_console_token"

LOOPBACK = ("localhost", "127.0.0.1", "[::1]")
"""The names a console answers for, on any port, when it is given none: this machine's
own, which a page of another origin cannot send as its Host (`eventcraft console`
starts from the same ones, on its port)."""


LOOPBACK_NAMES = ("localhost", "ip6-localhost")
"""Names of this machine alone, beside the loopback addresses."""


def loopback(host: str) -> bool:
    """Whether only this machine can reach `host` (an address or a name, no port)."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class Refused(Exception):
    """A request the console will not serve: its status code and why.

    The console raises it and answers it itself, as an error page with that status code
    and reason: a read-only console's action, an action from another origin or with a
    wrong CSRF token (403).

    Example::

        from eventcraft import App
        from eventcraft.console import create_app
        from eventcraft.eventstore import EventStore
        from eventcraft.messaging import Inbox, IncomingMessage, Mapped
        from starlette.testclient import TestClient

        store = EventStore.open("sqlite:///shop.db")
        with Inbox("orders-in", store, lambda m: Mapped("order-7", "Received", m.json())) as inbox:
            inbox.take(IncomingMessage("msg-1", b"not json"))  # waits in the error store

        with TestClient(create_app(store, App()), base_url="http://localhost") as browser:
            page = browser.get("/messaging/failed/resend?inbox=orders-in&id=msg-1")
        assert page.status_code == 403  # Refused(403, reason), answered as an error page
        assert "this console is read-only: start it with --allow-actions to act" in page.text
    """

    def __init__(self, status_code: int, reason: str) -> None:
        super().__init__(reason)
        self.status_code = status_code
        self.reason = reason


class HostNames:
    """The names a console answers for, each `name` (any port) or `name:port`."""

    def __init__(self, names: Iterable[str]) -> None:
        given = list(names)
        self.names = [_name_and_port(name) for name in given]
        if not self.names or any(not name for name, _ in self.names):
            raise InputError(f"a console's host names must not be empty: {given!r}")

    def beyond_loopback(self) -> list[str]:
        """Those of the names that other machines can reach the console by."""
        return [name for name, _ in self.names if not loopback(name)]

    def allow(self, netloc: str) -> bool:
        """Whether `netloc` (a Host header, or an origin's `host[:port]`) is one of them."""
        name, port = _name_and_port(netloc)
        # No port in a Host is the scheme's default: the console itself serves http.
        return any(name == n and p in (None, port or "80") for n, p in self.names)


def _name_and_port(netloc: str) -> tuple[str, str | None]:
    netloc = netloc.strip().lower()
    if netloc.endswith("]") or ":" not in netloc:  # `[::1]` or `name`: no port
        return netloc, None
    name, _, port = netloc.rpartition(":")
    return name, port


class TrustedHosts:
    """ASGI middleware: a request whose Host is not one of `hosts` gets 400."""

    def __init__(self, app: ASGIApp, hosts: HostNames) -> None:
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        host = Request(scope).headers.get("host", "")
        if self.hosts.allow(host):
            await self.app(scope, receive, send)
            return
        response = PlainTextResponse(
            f"400: this console does not answer for the host {host!r}: open it by a name it "
            "was started for (`eventcraft console --allow-host NAME` adds one, as does "
            "`create_app(..., hosts=[NAME])` for a console mounted in a service)",
            status_code=400,
        )
        await response(scope, receive, send)


class TokenRequired:
    """ASGI middleware: every HTTP request carries the token, or gets 401."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        given = request.query_params.get("token")
        if given is not None and _same(given, self.token):
            response: Response = RedirectResponse(_without_token(request), status_code=303)
            response.set_cookie(TOKEN_COOKIE, self.token, httponly=True, samesite="strict")
        elif _same(_presented(request), self.token):
            await self.app(scope, receive, send)
            return
        else:
            response = PlainTextResponse(
                "401: this console needs its token (?token=..., or Authorization: Bearer ...)",
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        await response(scope, receive, send)


HEADERS = [
    # Pages load only what the console serves itself, and no other site may frame them.
    (b"content-security-policy", b"default-src 'self'; frame-ancestors 'none'; form-action 'self'"),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
]


class SecurityHeaders:
    """ASGI middleware: every response carries `HEADERS`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *HEADERS]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def check_action(
    request: Request, allowed: bool, csrf: str, form_token: object, hosts: HostNames | None
) -> None:
    """Refuse an action on a read-only console, from another origin (one not of `hosts`,
    or, with none given, not the request's own), or without the console's CSRF token."""
    if not allowed:
        raise Refused(403, "this console is read-only: start it with --allow-actions to act")
    origin = request.headers.get("origin")
    if origin is not None and not _same_origin(origin, request, hosts):
        raise Refused(403, f"an action from another origin ({origin}) is refused")
    if not isinstance(form_token, str) or not _same(form_token, csrf):
        raise Refused(403, "the form's CSRF token is missing or wrong: reload the page")


def _same_origin(origin: str, request: Request, hosts: HostNames | None) -> bool:
    if hosts is None:
        return origin == f"{request.url.scheme}://{request.url.netloc}"
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and hosts.allow(parts.netloc)


def _presented(request: Request) -> str:
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip()
    return request.cookies.get(TOKEN_COOKIE, "")


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


def _without_token(request: Request) -> str:
    kept = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
    return request.url.path + (f"?{urlencode(kept)}" if kept else "")
