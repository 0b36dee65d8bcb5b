"""The HTTP intake, served by a real ASGI server: 202 once stored, the same on every
retry, 409 for a used key with another body."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
import pytest
import uvicorn
from eventcraft.eventstore import EventStore
from eventcraft.messaging import HttpIntake, Inbox, MessagingConfigError

from .brokers import free_port, wait_for
from .workers import order_received


class Served:
    def __init__(self, app: Any) -> None:
        self.port = free_port()
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        wait_for(lambda: self.server.started, 20, "uvicorn to start")

    def post(
        self, body: bytes, key: str | None, path: str = "/orders", method: str = "POST"
    ) -> tuple[int, dict[str, Any]]:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", data=body, method=method
        )
        if key is not None:
            request.add_header("Idempotency-Key", key)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, orjson.loads(response.read())
        except urllib.error.HTTPError as error:
            with error:
                return error.code, orjson.loads(error.read())

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture
def served(shared_store_url: str) -> Iterator[tuple[Served, EventStore]]:
    with (
        EventStore.open(shared_store_url) as store,
        Inbox("orders-http", store, order_received) as inbox,
    ):
        server = Served(HttpIntake(inbox, max_body=1000))
        try:
            yield server, store
        finally:
            server.stop()


def test_a_post_is_stored_once_and_every_retry_gets_the_same_answer(
    served: tuple[Served, EventStore],
) -> None:
    server, store = served
    first = server.post(b'{"order": 7, "lines": 2}', "order-7-placed")
    assert first[0] == 202
    assert first[1]["stream_id"] == "order-7" and first[1]["position"] == 1
    assert first[1]["message_id"] == "order-7-placed" and first[1]["version"] == 1
    for _ in range(3):
        assert server.post(b'{"order": 7, "lines": 2}', "order-7-placed") == first
    assert server.post(b'{"order": 7, "lines": 3}', "order-7-placed")[0] == 409
    assert [e.data for e in store.read_all()] == [{"order": 7, "lines": 2}]


def test_concurrent_retries_of_one_message_store_it_once(
    served: tuple[Served, EventStore],
) -> None:
    server, store = served
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: server.post(b'{"order": 1}', "m-1"), range(16)))
    assert {status for status, _ in answers} == {202}
    assert len({orjson.dumps(a) for _, a in answers}) == 1
    assert len(list(store.read_all())) == 1


def test_bad_requests_are_refused_with_what_was_wrong_and_store_nothing(
    served: tuple[Served, EventStore],
) -> None:
    server, store = served
    assert server.post(b'{"order": 1}', None) == (
        400,
        {"error": "Idempotency-Key: a message needs a non-empty message id, not ''"},
    )
    assert server.post(b"not json", "k-1")[0] == 422
    assert "the body is not JSON" in server.post(b"not json", "k-1")[1]["error"]
    status, answer = server.post(b"{}", "k-2")
    assert (status, answer) == (422, {"error": "InvalidMessage: not an order: {}"})
    assert server.post(b"x" * 1001, "k-3")[0] == 413
    assert server.post(b"", "k-4", method="PUT")[0] == 405
    assert list(store.read_all()) == []


def test_an_intake_needs_an_inbox() -> None:
    with pytest.raises(MessagingConfigError, match="through an Inbox"):
        HttpIntake(object())  # type: ignore[arg-type]
