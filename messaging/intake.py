"""The HTTP intake: an ASGI app that turns a POST into a stored message, once.

The bridge from request-reply to fire-and-forget: a client POSTs a message
with an `Idempotency-Key` (its message id) and gets 202 Accepted with the
position it was stored at as soon as the append committed. It may retry
until it hears back: every retry with the same key and body gets the same
answer and stores nothing more; the same key with a different body is
refused with 409, since the key is taken. A key belongs to its intake (the
event id is derived from the inbox's name and the key), so two intakes of a
store never share one, and a client cannot name an event it did not send.

    app = HttpIntake(Inbox("orders-http", store, to_event), authenticate=check_token)
    # uvicorn myservice:app, or mounted under a path of a Starlette/FastAPI app

A message is stored only once its body arrived whole: its Content-Length
reached, or its chunked stream ended. A client gone mid-body stores nothing
and is not answered; its retry is stored as a first send.

Answers: 202 stored (JSON: message_id, event_id, stream_id, version,
position); 400 no or bad `Idempotency-Key`; 401/403 refused by the
`authenticate` hook; 405 not a POST; 409 key used for another message; 413
body over `max_body` bytes; 415 a content type not in `content_types` (JSON:
error, accepted; header `Accept`); 422 the mapping refused the message
(JSON: error); 503 the store, or the hook, is unreachable (retry later,
safely). Every error says what the request did wrong and nothing of the code
behind it. The store is called on worker threads, never on the event loop.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

import orjson
from eventcraft.eventstore import StoreUnavailable

from . import telemetry
from .errors import (
    Forbidden,
    InvalidMessage,
    MessageIdConflict,
    MessagingConfigError,
    Unauthenticated,
)
from .inbox import Inbox
from .messages import MAX_MESSAGE_ID, IncomingMessage

if TYPE_CHECKING:
    from starlette.requests import Request

log = logging.getLogger("eventcraft.messaging")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
Refusal: TypeAlias = tuple[int, dict[str, Any], list[tuple[bytes, bytes]]]
"""An answer refusing a request: status, JSON body, extra headers."""
Authenticate: TypeAlias = Callable[["Request"], "bool | Awaitable[bool | None] | None"]
"""A hook deciding who may send: see `HttpIntake`.

Example::

    import hmac

    from eventcraft.eventstore import EventStore
    from eventcraft.messaging import Authenticate, HttpIntake, Inbox, Mapped
    from starlette.requests import Request
    from starlette.testclient import TestClient

    def bearer_token(request: Request) -> bool:
        sent = request.headers.get("authorization", "")
        return hmac.compare_digest(sent, "Bearer s3cret-token")  # False: 401

    check: Authenticate = bearer_token
    store = EventStore.open("sqlite:///intake.db")
    inbox = Inbox("orders-http", store, lambda m: Mapped("order-7", "Received", m.json()))
    client = TestClient(HttpIntake(inbox, authenticate=check))
    key = {"Idempotency-Key": "order-7-placed"}
    assert client.post("/orders", json={}, headers=key).status_code == 401
    signed = {**key, "Authorization": "Bearer s3cret-token"}
    assert client.post("/orders", json={}, headers=signed).status_code == 202
"""

_KEY = "idempotency-key"
_JSON = ("application/json",)


class _Gone(Exception):
    """The client went away before its body arrived whole."""


class HttpIntake:
    """An ASGI application storing each POSTed message through `inbox`, once by its key.

    `content_types`: the media types taken (parameters such as `charset` aside),
    any other is refused with 415; None takes any content type, or none. `authenticate`:
    called with the Starlette `Request` (method, path, headers, client; not the body) before
    anything is read or stored, on every request, retries too; sync hooks run in a
    worker thread, async ones on the loop. Returning None or True lets the request
    in; False refuses it (401); raising `Unauthenticated` (401, with its challenge
    in `WWW-Authenticate`) or `Forbidden` (403) refuses it with that detail; any
    other exception is 503, logged, and the client told nothing of it.

    Example::

        from eventcraft.eventstore import EventStore
        from eventcraft.messaging import HttpIntake, Inbox, IncomingMessage, Mapped
        from starlette.testclient import TestClient

        def order_received(message: IncomingMessage) -> Mapped:
            return Mapped(f"order-{message.json()['order']}", "OrderReceived", message.json())

        store = EventStore.open("sqlite:///intake.db")
        app = HttpIntake(Inbox("orders-http", store, order_received))  # uvicorn myservice:app
        client = TestClient(app)
        key = {"Idempotency-Key": "order-7-placed"}
        answer = client.post("/orders", json={"order": 7}, headers=key)
        assert answer.status_code == 202 and answer.json()["position"] == 1
        assert client.post("/orders", json={"order": 7}, headers=key).json() == answer.json()
        assert client.post("/orders", json={"order": 8}, headers=key).status_code == 409
        assert store.high_water_mark() == 1  # the retry stored nothing more
    """

    def __init__(
        self,
        inbox: Inbox,
        *,
        max_body: int = 1024 * 1024,
        content_types: Sequence[str] | None = _JSON,
        authenticate: Authenticate | None = None,
    ) -> None:
        if not isinstance(inbox, Inbox):
            raise MessagingConfigError(f"an HTTP intake stores through an Inbox, not {inbox!r}")
        if authenticate is not None:
            if not callable(authenticate):
                raise MessagingConfigError(
                    f"authenticate must be callable with a request, not {authenticate!r}"
                )
            try:
                from starlette.requests import Request  # noqa: F401
            except ImportError as error:
                raise MessagingConfigError(
                    "authenticate is handed a Starlette Request: "
                    f"pip install 'eventcraft[service]' ({error})"
                ) from None
        self.inbox = inbox
        self.max_body = checked_max_body(max_body)
        self.content_types = media_types(content_types)
        self.authenticate = authenticate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        if scope["method"] != "POST":
            await _answer(send, 405, {"error": "only POST is accepted"}, [(b"allow", b"POST")])
            return
        if self.authenticate is not None:
            refusal = await self._authenticated(scope)
            if refusal is not None:
                await _answer(send, *refusal)
                return
        headers = {
            name.decode("latin-1").lower(): value.decode("latin-1")
            for name, value in scope["headers"]
        }
        refusal = self._refused(headers)
        if refusal is not None:
            await _answer(send, *refusal)
            return
        try:
            body = await _body(receive, self.max_body)
        except _Gone:
            return  # nobody to answer; the client's retry will be a first send
        if body is None:
            await _answer(send, 413, {"error": f"the body exceeds {self.max_body} bytes"})
            return
        declared = headers.get("content-length")
        if declared is not None and declared.strip() != str(len(body)):
            # The server ends a body at its Content-Length; this one did not.
            await _answer(send, 400, {"error": "the body is not as long as its Content-Length"})
            return
        message = IncomingMessage(headers[_KEY].strip(), body, headers, scope["path"])
        status, answer = await asyncio.to_thread(self._store, message)
        extra = [(b"retry-after", b"1")] if status == 503 else []
        await _answer(send, status, answer, extra)

    def _refused(self, headers: dict[str, str]) -> Refusal | None:
        """Why the request is refused before its body is read; None if it is not."""
        if self.content_types is not None:
            sent = headers.get("content-type", "").partition(";")[0].strip().lower()
            if sent not in self.content_types:
                accepted = list(self.content_types)
                told = f"the content type {sent!r} is not accepted here"
                if not sent:
                    told = "the request has no Content-Type"
                answer = {"error": told, "accepted": accepted}
                return 415, answer, [(b"accept", ", ".join(accepted).encode())]
        key = headers.get(_KEY, "").strip()
        if not key:
            return 400, {"error": "the request needs an Idempotency-Key header"}, []
        if len(key) > MAX_MESSAGE_ID or not key.isprintable():
            told = f"an Idempotency-Key is at most {MAX_MESSAGE_ID} printable characters"
            return 400, {"error": told}, []
        declared = headers.get("content-length", "").strip()
        if declared.isdigit() and int(declared) > self.max_body:
            return 413, {"error": f"the body exceeds {self.max_body} bytes"}, []
        return None

    async def _authenticated(self, scope: Scope) -> Refusal | None:
        """None if the hook lets the request in; else the refusal to answer."""
        assert self.authenticate is not None
        verdict, refusal = await hook_verdict(self.authenticate, scope, self.inbox.name)
        if refusal is not None:
            return refusal
        if verdict is None or verdict is True:
            return None
        if verdict is False:
            return 401, {"error": "the request is not authenticated"}, []
        log.error(
            "HTTP intake %r: the authentication hook returned %s, not None, True or False",
            self.inbox.name,
            type(verdict).__name__,
        )
        return 500, {"error": "the intake could not decide whether to take the request"}, []

    def _store(self, message: IncomingMessage) -> tuple[int, dict[str, Any]]:
        conflict = f"the Idempotency-Key {message.message_id!r} was used for another message"
        try:
            stored = self.inbox.append_event(message)
        except StoreUnavailable as error:
            log.warning("HTTP intake %r: %s", self.inbox.name, error)
            return 503, {"error": "the store is unavailable; retrying is safe"}
        except MessageIdConflict:
            # Told to the client, which sent it: not kept in the inbox's error store.
            return 409, {"error": conflict}
        except InvalidMessage as error:
            # The mapping's (or the body's) own words about what the client sent.
            return 422, {"error": str(error)}
        except Exception as error:
            log.warning(
                "HTTP intake %r: message %r could not be made an event: %s",
                self.inbox.name,
                message.message_id,
                telemetry.told(error, "the exception Inbox.append_event raises (not kept)"),
            )
            return 422, {"error": "the intake could not make an event of this message"}
        return 202, {
            "message_id": message.message_id,
            "event_id": str(stored.id),
            "stream_id": stored.stream_id,
            "version": stored.version,
            "position": stored.position,
        }


async def hook_verdict(
    hook: Callable[..., Any], scope: Scope, intake: str
) -> tuple[Any, Refusal | None]:
    """What an authentication hook returned for the request of `scope`, or the refusal its
    exception makes: `Unauthenticated` 401, `Forbidden` 403, anything else 503 (logged
    without its message, which may quote a credential)."""
    from starlette.requests import Request

    request = Request(scope)  # no receive: the hook cannot take the body
    try:
        if inspect.iscoroutinefunction(hook):
            verdict: Any = await hook(request)
        else:
            verdict = await asyncio.to_thread(hook, request)
            if inspect.isawaitable(verdict):
                verdict = await verdict
    except Unauthenticated as refused:
        challenge = [] if refused.challenge is None else [refused.challenge]
        headers = [(b"www-authenticate", told.encode("latin-1")) for told in challenge]
        return None, (401, {"error": refused.detail}, headers)
    except Forbidden as refused:
        return None, (403, {"error": refused.detail}, [])
    except Exception as error:
        log.error(
            "HTTP intake %r: the authentication hook failed: %s",
            intake,
            telemetry.traced(error, "the exception the hook raises (it is not kept)"),
        )
        told = "the request could not be authenticated; retrying is safe"
        return None, (503, {"error": told}, [(b"retry-after", b"1")])
    return verdict, None


def checked_max_body(max_body: object) -> int:
    if isinstance(max_body, bool) or not isinstance(max_body, int) or max_body < 1:
        raise MessagingConfigError(f"max_body must be bytes >= 1, not {max_body!r}")
    return max_body


def media_types(types: Sequence[str] | None) -> tuple[str, ...] | None:
    if types is None:
        return None
    if isinstance(types, str) or not types:
        raise MessagingConfigError(
            f"content_types is a list of media types such as 'application/json', not {types!r}"
        )
    checked = []
    for media_type in types:
        kind, slash, subtype = str(media_type).strip().lower().partition("/")
        if not (isinstance(media_type, str) and kind and slash and subtype) or ";" in subtype:
            raise MessagingConfigError(
                f"content_types holds media types such as 'application/json', not {media_type!r}"
            )
        checked.append(f"{kind}/{subtype}")
    return tuple(checked)


async def _body(receive: Receive, limit: int) -> bytes | None:
    """The whole body; None past `limit` bytes; `_Gone` if the client left before its end."""
    chunks: list[bytes] = []
    size = 0
    while True:
        event = await receive()
        if event["type"] == "http.disconnect":
            raise _Gone
        chunk = event.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not event.get("more_body", False):
            return b"".join(chunks)


async def _answer(
    send: Send, status: int, body: dict[str, Any], headers: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    payload = orjson.dumps(body)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        event = await receive()
        if event["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif event["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
