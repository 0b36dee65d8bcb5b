"""The HTTP intake: an ASGI app that turns a POST into a stored message, once.

The bridge from request-reply to fire-and-forget: a client POSTs a message
with an `Idempotency-Key` (its message id) and gets 202 Accepted with the
position it was stored at as soon as the append committed. It may retry
until it hears back: every retry with the same key and body gets the same
answer and stores nothing more; the same key with a different body is
refused with 409, since the key is taken.

    app = HttpIntake(Inbox("orders-http", store, to_event))
    # uvicorn myservice:app, or mounted under a path of a Starlette/FastAPI app

Answers: 202 stored (JSON: message_id, event_id, stream_id, version,
position); 400 no or bad `Idempotency-Key`; 405 not a POST; 409 key used for
another message; 413 body over `max_body` bytes; 422 the mapping refused the
message (JSON: error); 503 the store is unreachable (retry later, safely).
The store is called on worker threads, never on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any

import orjson
from eventcraft.eventstore import DuplicateEventId, StoreUnavailable

from .errors import MessageIdConflict, MessagingConfigError
from .inbox import BODY_HASH, Inbox, body_hash
from .messages import IncomingMessage, event_id_for

log = logging.getLogger("eventcraft.messaging")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

_KEY = b"idempotency-key"


class HttpIntake:
    """An ASGI application storing each POSTed message through `inbox`, once by its key."""

    def __init__(self, inbox: Inbox, *, max_body: int = 1024 * 1024) -> None:
        if not isinstance(inbox, Inbox):
            raise MessagingConfigError(f"an HTTP intake stores through an Inbox, not {inbox!r}")
        if isinstance(max_body, bool) or not isinstance(max_body, int) or max_body < 1:
            raise MessagingConfigError(f"max_body must be bytes >= 1, not {max_body!r}")
        self.inbox = inbox
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        if scope["method"] != "POST":
            await _answer(send, 405, {"error": "only POST is accepted"}, [(b"allow", b"POST")])
            return
        headers = {name.lower(): value for name, value in scope["headers"]}
        key = headers.get(_KEY, b"").decode("latin-1").strip()
        try:
            event_id_for(key)
        except ValueError as error:
            await _answer(send, 400, {"error": f"Idempotency-Key: {error}"})
            return
        body = await _body(receive, self.max_body)
        if body is None:
            await _answer(send, 413, {"error": f"the body exceeds {self.max_body} bytes"})
            return
        message = IncomingMessage(
            key,
            body,
            {k.decode("latin-1"): v.decode("latin-1") for k, v in headers.items()},
            scope.get("path", ""),
        )
        status, answer = await asyncio.to_thread(self._store, message)
        extra = [(b"retry-after", b"1")] if status == 503 else []
        await _answer(send, status, answer, extra)

    def _store(self, message: IncomingMessage) -> tuple[int, dict[str, Any]]:
        store = self.inbox.store
        try:
            self.inbox.append(message)
            stored = store.read_event(message.event_id)
            if stored is None:  # pragma: no cover - the append just committed it
                raise StoreUnavailable("the stored message cannot be read back")
            if stored.metadata.get(BODY_HASH) != body_hash(message.body):
                raise MessageIdConflict(message.message_id, "it was sent with another body")
        except StoreUnavailable as error:
            log.warning("HTTP intake: %s", error)
            return 503, {"error": "the store is unavailable; retrying is safe"}
        except (MessageIdConflict, DuplicateEventId) as error:
            return 409, {"error": str(error)}
        except Exception as error:
            return 422, {"error": f"{type(error).__name__}: {error}"}
        return 202, {
            "message_id": message.message_id,
            "event_id": str(stored.id),
            "stream_id": stored.stream_id,
            "version": stored.version,
            "position": stored.position,
        }


async def _body(receive: Receive, limit: int) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        event = await receive()
        if event["type"] == "http.disconnect":
            return b"".join(chunks)
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
