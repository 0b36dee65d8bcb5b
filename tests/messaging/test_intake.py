"""The HTTP intake, served by a real ASGI server: 202 once stored, the same on every
retry, 409 for a used key with another body; a key belongs to its intake, a cut-off
body is never stored, and what a client is told names nothing of ours."""

from __future__ import annotations

import logging
import socket
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
import pytest
import uvicorn
from eventcraft.eventstore import EventStore, NewEvent
from eventcraft.messaging import (
    Forbidden,
    HttpIntake,
    Inbox,
    IncomingMessage,
    Mapped,
    MessagingConfigError,
    Unauthenticated,
)
from starlette.requests import Request

from .brokers import wait_for
from .unscoped import stored_unscoped
from .workers import order_received

Answer = tuple[int, dict[str, Any]]


def raw_text(message: IncomingMessage) -> Mapped:
    """Any body at all, stored as text: even a cut-off one would be."""
    return Mapped("raw-1", "RawReceived", {"text": message.body.decode("latin-1")})


def order_by_key(message: IncomingMessage) -> Mapped:
    """A mapping with a bug: a body without `order` raises KeyError."""
    return Mapped(f"order-{message.json()['order']}", "OrderReceived", {})


def quoting(message: IncomingMessage) -> Mapped:
    """A mapping whose error quotes what the client sent: a customer's name."""
    raise ValueError(f"no order for {message.json()['customer']}")


class Routed:
    """Intakes under their paths, as an application mounts them; counts the requests
    each has finished handling, so a test waits for that and not for a while."""

    def __init__(self, routes: dict[str, HttpIntake]) -> None:
        self.routes = routes
        self.handled = 0
        self.changed = threading.Condition()

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await next(iter(self.routes.values()))(scope, receive, send)
            return
        try:
            await self.routes[scope["path"]](scope, receive, send)
        finally:
            with self.changed:
                self.handled += 1
                self.changed.notify_all()

    def wait_handled(self, count: int) -> None:
        with self.changed:
            if not self.changed.wait_for(lambda: self.handled >= count, 30):
                raise AssertionError(f"the server handled {self.handled} of {count} requests")


def _named(headers: Any) -> dict[str, str]:
    return {name.lower(): value for name, value in headers.items()}


class Served:
    def __init__(self, routes: dict[str, HttpIntake]) -> None:
        # Bound here, to the port the kernel gives, and handed to uvicorn: no other test
        # (another pytest-xdist worker's) can take the port before the server listens.
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.port = int(self.socket.getsockname()[1])
        self.app = Routed(routes)
        self.server = uvicorn.Server(uvicorn.Config(self.app, log_level="warning"))
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True
        )
        self.thread.start()
        wait_for(self._listening, 20, "uvicorn to listen")

    def _listening(self) -> bool:
        if not self.server.started:
            return False
        with socket.socket() as probe:
            return probe.connect_ex(("127.0.0.1", self.port)) == 0

    def post(
        self,
        body: bytes,
        key: str | None,
        path: str = "/orders",
        method: str = "POST",
        headers: dict[str, str] | None = None,
    ) -> Answer:
        return self.request(body, key, path, method, headers)[:2]

    def request(
        self,
        body: bytes,
        key: str | None,
        path: str = "/orders",
        method: str = "POST",
        headers: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", data=body, method=method
        )
        for name, value in {"Content-Type": "application/json", **(headers or {})}.items():
            request.add_header(name, value)
        if key is not None:
            request.add_header("Idempotency-Key", key)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, orjson.loads(response.read()), _named(response.headers)
        except urllib.error.HTTPError as error:
            with error:
                return error.code, orjson.loads(error.read()), _named(error.headers)

    def raw(self, head: str, body: bytes, *, whole: bool) -> Answer | None:
        """Send `head` and `body` on a socket of our own; unless `whole`, close the
        socket after them without reading (the client is gone mid-body)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=30) as connection:
            connection.sendall(head.replace("\n", "\r\n").encode() + b"\r\n" + body)
            if not whole:
                return None
            answer = b""
            while chunk := connection.recv(65536):
                answer += chunk
        status_line, _, rest = answer.partition(b"\r\n")
        return int(status_line.split()[1]), orjson.loads(rest.partition(b"\r\n\r\n")[2])

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.socket.close()


@pytest.fixture
def sql_store(shared_store_url: str) -> Iterator[EventStore]:
    with EventStore.open(shared_store_url) as store:
        yield store


@pytest.fixture
def serve(sql_store: EventStore) -> Iterator[Callable[..., Served]]:
    """Serves intakes: `serve(orders=dict(...), raw=dict(...))` puts an inbox named
    `{name}-http` at `/{name}` with the intake's keyword arguments."""
    inboxes: list[Inbox] = []
    servers: list[Served] = []
    mappings = {
        "orders": order_received,
        "raw": raw_text,
        "buggy": order_by_key,
        "quoting": quoting,
    }

    def start(**intakes: dict[str, Any]) -> Served:
        routes = {}
        for name, arguments in intakes.items():
            inbox = Inbox(f"{name}-http", sql_store, mappings[name])
            inboxes.append(inbox)
            routes[f"/{name}"] = HttpIntake(inbox, **{"max_body": 1000, **arguments})
        servers.append(Served(routes))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()
    for inbox in inboxes:
        inbox.close()


@pytest.fixture
def served(serve: Callable[..., Served]) -> Served:
    return serve(orders={}, raw={}, buggy={})


def test_a_post_is_stored_once_and_every_retry_gets_the_same_answer(
    served: Served, sql_store: EventStore
) -> None:
    first = served.post(b'{"order": 7, "lines": 2}', "order-7-placed")
    assert first[0] == 202
    assert first[1]["stream_id"] == "order-7" and first[1]["position"] == 1
    assert first[1]["message_id"] == "order-7-placed" and first[1]["version"] == 1
    for _ in range(3):
        assert served.post(b'{"order": 7, "lines": 2}', "order-7-placed") == first
    assert served.post(b'{"order": 7, "lines": 3}', "order-7-placed") == (
        409,
        {"error": "the Idempotency-Key 'order-7-placed' was used for another message"},
    )
    assert [e.data for e in sql_store.read_all()] == [{"order": 7, "lines": 2}]


def test_concurrent_retries_of_one_message_store_it_once(
    served: Served, sql_store: EventStore
) -> None:
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: served.post(b'{"order": 1}', "m-1"), range(16)))
    assert {status for status, _ in answers} == {202}
    assert len({orjson.dumps(a) for _, a in answers}) == 1
    assert len(list(sql_store.read_all())) == 1


def test_bad_requests_are_refused_with_what_was_wrong_and_store_nothing(
    served: Served, sql_store: EventStore
) -> None:
    assert served.post(b'{"order": 1}', None) == (
        400,
        {"error": "the request needs an Idempotency-Key header"},
    )
    assert served.post(b'{"order": 1}', "k" * 201) == (
        400,
        {"error": "an Idempotency-Key is at most 200 printable characters"},
    )
    status, answer = served.post(b"not json", "k-1")
    assert status == 422 and answer["error"].startswith("message 'k-1': the body is not JSON (")
    assert served.post(b"{}", "k-2") == (422, {"error": "not an order: {}"})
    assert served.post(b"x" * 1001, "k-3") == (413, {"error": "the body exceeds 1000 bytes"})
    assert served.post(b"", "k-4", method="PUT")[0] == 405
    assert list(sql_store.read_all()) == []


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_body_cut_off_by_a_disconnect_stores_nothing_and_its_retry_is_stored(
    served: Served, sql_store: EventStore, framing: str
) -> None:
    body = b'{"order": 7, "note": "' + b"x" * 200 + b'"}'
    head = "POST /raw HTTP/1.1\nHost: intake\nContent-Type: application/json\n"
    head += "Idempotency-Key: cut-1\nConnection: close\n"
    if framing == "content-length":
        head += f"Content-Length: {len(body)}\n"
        whole, cut = body, body[:100]
    else:
        head += "Transfer-Encoding: chunked\n"
        whole = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:100], body[100:]))
        whole += b"0\r\n\r\n"
        cut = whole[: whole.index(body[100:])]  # the first chunk, not the end of the stream
    assert served.raw(head, cut, whole=False) is None
    served.app.wait_handled(1)
    assert list(sql_store.read_all()) == []
    status, answer = served.raw(head, whole, whole=True) or (0, {})
    assert status == 202 and answer["message_id"] == "cut-1"
    assert [e.data["text"].encode() for e in sql_store.read_all()] == [body]


def test_a_key_belongs_to_its_intake(served: Served, sql_store: EventStore) -> None:
    orders = served.post(b'{"order": 42}', "42", "/orders")
    raw = served.post(b'{"order": 42}', "42", "/raw")
    assert orders[0] == 202 and raw[0] == 202
    assert orders[1]["event_id"] != raw[1]["event_id"]
    assert [e.stream_id for e in sql_store.read_all()] == ["order-42", "raw-1"]
    assert served.post(b'{"order": 42}', "42", "/raw") == raw


def test_a_uuid_key_is_not_an_event_id_and_a_conflict_names_nothing_outside_the_intake(
    served: Served, sql_store: EventStore
) -> None:
    secret = uuid.uuid4()
    sql_store.append("payroll-ann", [NewEvent("SalaryPaid", {"cents": 9_000_00}, id=secret)])
    status, answer = served.post(b'{"order": 3}', str(secret))
    assert status == 202 and answer["event_id"] != str(secret)
    assert answer["stream_id"] == "order-3"
    status, answer = served.post(b'{"order": 4}', str(secret))
    assert status == 409
    assert "payroll" not in answer["error"] and "order-" not in answer["error"]
    assert [e.stream_id for e in sql_store.read_all()] == ["payroll-ann", "order-3"]


def test_a_retry_of_a_key_stored_before_keys_were_scoped_gets_the_first_answer(
    served: Served, sql_store: EventStore
) -> None:
    earlier = stored_unscoped(sql_store, "order-1-placed", b'{"order": 1}', "order-1")
    assert served.post(b'{"order": 1}', "order-1-placed") == (
        202,
        {
            "message_id": "order-1-placed",
            "event_id": str(earlier),
            "stream_id": "order-1",
            "version": 1,
            "position": 1,
        },
    )
    assert served.post(b'{"order": 2}', "order-1-placed")[0] == 409
    assert [e.id for e in sql_store.read_all()] == [earlier]


def test_an_error_in_the_mapping_is_told_to_the_client_without_our_code(
    served: Served, sql_store: EventStore
) -> None:
    status, answer = served.post(b'{"customer": "ann"}', "k-1", "/buggy")
    assert status == 422
    assert answer == {"error": "the intake could not make an event of this message"}
    assert list(sql_store.read_all()) == []


def test_a_mapping_or_hook_failure_quoting_what_the_client_sent_is_logged_by_its_type(
    serve: Callable[..., Served], caplog: pytest.LogCaptureFixture
) -> None:
    def hook(request: Request) -> None:
        raise RuntimeError(f"no account for {request.headers['authorization']}")

    served = serve(quoting={}, raw={"authenticate": hook})
    with caplog.at_level(logging.DEBUG):
        assert served.post(b'{"customer": "Ann Quillon"}', "k-1", "/quoting")[0] == 422
        secret = {"Authorization": "Bearer s3cret-t0ken"}
        assert served.post(b'{"order": 1}', "k-2", "/raw", headers=secret)[0] == 503
    logged = caplog.text + repr([record.__dict__ for record in caplog.records])
    assert "Ann Quillon" not in logged and "s3cret-t0ken" not in logged
    assert "ValueError raised in quoting" in logged and "RuntimeError raised in hook" in logged


def test_a_content_type_the_intake_does_not_take_is_refused_with_those_it_takes(
    serve: Callable[..., Served], sql_store: EventStore
) -> None:
    served = serve(orders={}, raw={"content_types": ["application/json", "text/plain"]})
    status, answer, headers = served.request(
        b'{"order": 1}', "k-1", headers={"Content-Type": "text/plain"}
    )
    assert status == 415 and headers["accept"] == "application/json"
    assert answer == {
        "error": "the content type 'text/plain' is not accepted here",
        "accepted": ["application/json"],
    }
    status, answer, _ = served.request(b"{}", "k-1", "/raw", headers={"Content-Type": "image/png"})
    assert status == 415 and answer["accepted"] == ["application/json", "text/plain"]
    assert served.raw(
        "POST /orders HTTP/1.1\nHost: intake\nIdempotency-Key: k-1\nContent-Length: 12\n"
        "Connection: close\n",
        b'{"order": 1}',
        whole=True,
    ) == (415, {"error": "the request has no Content-Type", "accepted": ["application/json"]})
    assert list(sql_store.read_all()) == []
    charset = {"Content-Type": "Application/JSON; charset=utf-8"}
    assert served.post(b'{"order": 1}', "k-1", headers=charset)[0] == 202
    assert served.post(b"hello", "k-2", "/raw", headers={"Content-Type": "text/plain"})[0] == 202


def _bearer(request: Request) -> None:
    authorization = request.headers.get("authorization", "")
    if not authorization.startswith("Bearer "):
        raise Unauthenticated("send a bearer token", challenge='Bearer realm="orders"')
    if authorization != "Bearer shop-1":
        raise Forbidden("this token may not send orders")


async def _bearer_async(request: Request) -> None:
    _bearer(request)


@pytest.mark.parametrize("hook", [_bearer, _bearer_async], ids=["sync", "async"])
def test_an_intake_takes_only_what_its_authentication_hook_lets_through(
    serve: Callable[..., Served], sql_store: EventStore, hook: Callable[[Request], Any]
) -> None:
    seen: list[int] = []

    def authenticate(request: Request) -> Any:
        seen.append(len(list(sql_store.read_all())))
        return hook(request)

    served = serve(orders={"authenticate": authenticate})
    status, answer, headers = served.request(b'{"order": 1}', "k-1")
    assert (status, answer) == (401, {"error": "send a bearer token"})
    assert headers["www-authenticate"] == 'Bearer realm="orders"'
    wrong = {"Authorization": "Bearer shop-2"}
    assert served.post(b'{"order": 1}', "k-1", headers=wrong) == (
        403,
        {"error": "this token may not send orders"},
    )
    assert list(sql_store.read_all()) == []
    right = {"Authorization": "Bearer shop-1"}
    assert served.post(b'{"order": 1}', "k-1", headers=right)[0] == 202
    # A stored key's answer is not given to a client the hook refuses.
    assert served.post(b'{"order": 1}', "k-1", headers=wrong)[0] == 403
    assert seen == [0, 0, 0, 1]


def test_a_hook_that_says_no_or_fails_refuses_the_request_and_stores_nothing(
    serve: Callable[..., Served], sql_store: EventStore
) -> None:
    def no(request: Request) -> bool:
        return request.headers.get("x-shop") == "1"

    def broken(request: Request) -> None:
        raise RuntimeError("the token service at 10.0.0.7 is down")

    served = serve(orders={"authenticate": no}, raw={"authenticate": broken})
    status, answer, headers = served.request(b'{"order": 1}', "k-1")
    assert (status, answer) == (401, {"error": "the request is not authenticated"})
    assert "www-authenticate" not in headers
    assert served.post(b'{"order": 1}', "k-1", "/raw") == (
        503,
        {"error": "the request could not be authenticated; retrying is safe"},
    )
    assert list(sql_store.read_all()) == []
    assert served.post(b'{"order": 1}', "k-1", headers={"X-Shop": "1"})[0] == 202


def test_an_intake_needs_an_inbox_and_sound_settings(sql_store: EventStore) -> None:
    with pytest.raises(MessagingConfigError, match="through an Inbox"):
        HttpIntake(object())  # type: ignore[arg-type]
    with Inbox("orders-http", sql_store, order_received) as inbox:
        with pytest.raises(MessagingConfigError, match="content_types"):
            HttpIntake(inbox, content_types=[])
        with pytest.raises(MessagingConfigError, match="content_types"):
            HttpIntake(inbox, content_types=["json"])
        with pytest.raises(MessagingConfigError, match="authenticate"):
            HttpIntake(inbox, authenticate="yes")  # type: ignore[arg-type]
