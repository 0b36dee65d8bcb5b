"""One HTTP intake for many tenants: the tenant comes from who the sender is (the
application's hook), never from what the request says; keys and retries are per tenant,
and a forged tenant in the body, a header or the path crosses nothing (issue 55)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from eventcraft.eventstore import Tenants
from eventcraft.messaging import (
    Forbidden,
    Inbox,
    IncomingMessage,
    Mapped,
    MessagingConfigError,
    TenantsIntake,
)
from starlette.requests import Request
from starlette.testclient import TestClient

TOKENS = {"Bearer acme-token": "acme", "Bearer globex-token": "globex"}


def order_received(message: IncomingMessage) -> Mapped:
    body = message.json()
    return Mapped(f"order-{body['order']}", "OrderReceived", body)


def tenant_of(request: Request) -> str | None:
    token = request.headers.get("authorization", "")
    if token == "Bearer suspended":
        raise Forbidden("this account is suspended")
    if token == "Bearer broken":
        raise RuntimeError("the token service said: token=Bearer broken is unknown")
    return TOKENS.get(token)


@pytest.fixture
def tenants(tmp_path: Path) -> Iterator[Tenants]:
    with Tenants(f"sqlite:///{tmp_path}/{{tenant}}.db", most_open=1) as opened:
        yield opened


@pytest.fixture
def client(tenants: Tenants) -> TestClient:
    made: list[str] = []

    def inbox(store):  # type: ignore[no-untyped-def]
        made.append(store.tenant)
        return Inbox("orders-http", store, order_received)

    app = TenantsIntake(tenants, inbox, tenant_of=tenant_of)
    client = TestClient(app)
    client.made = made  # type: ignore[attr-defined]
    return client


def _post(client: TestClient, token: str, key: str, order: object, **extra: str):  # type: ignore[no-untyped-def]
    headers = {"Idempotency-Key": key, "Authorization": token, **extra}
    return client.post("/orders", json={"order": order}, headers=headers)


def _orders(tenants: Tenants, tenant: str) -> list[tuple[str, object]]:
    return [(e.stream_id, e.data["order"]) for e in tenants.for_tenant(tenant).read_all()]


def test_each_message_is_stored_in_its_senders_tenant_once_by_its_key(
    client: TestClient, tenants: Tenants
) -> None:
    first = _post(client, "Bearer acme-token", "k-1", 7)
    assert first.status_code == 202 and first.json()["position"] == 1
    assert _post(client, "Bearer acme-token", "k-1", 7).json() == first.json()  # a retry
    assert _post(client, "Bearer acme-token", "k-1", 8).status_code == 409
    # The same key from another tenant is that tenant's own message.
    assert _post(client, "Bearer globex-token", "k-1", 9).status_code == 202
    assert _orders(tenants, "acme") == [("order-7", 7)]
    assert _orders(tenants, "globex") == [("order-9", 9)]
    assert client.made == ["acme", "globex"]  # type: ignore[attr-defined]


def test_a_forged_tenant_in_the_request_crosses_nothing(
    client: TestClient, tenants: Tenants
) -> None:
    headers = {"X-Tenant": "globex", "X-Forwarded-Tenant": "globex"}
    sent = client.post(
        "/t/globex/orders?tenant=globex",
        json={"order": 1, "tenant": "globex"},
        headers={"Idempotency-Key": "k", "Authorization": "Bearer acme-token", **headers},
    )
    assert sent.status_code == 202
    assert _orders(tenants, "acme") == [("order-1", 1)]
    assert _orders(tenants, "globex") == []


@pytest.mark.parametrize(
    ("token", "status", "told"),
    [
        ("", 401, "not authenticated"),
        ("Bearer guess", 401, "not authenticated"),
        ("Bearer suspended", 403, "suspended"),
        ("Bearer broken", 503, "retrying is safe"),
    ],
)
def test_a_sender_of_no_tenant_is_refused_and_nothing_is_stored(
    client: TestClient, tenants: Tenants, token: str, status: int, told: str
) -> None:
    answer = _post(client, token, "k-1", 7)
    assert answer.status_code == status and told in answer.json()["error"]
    assert "Bearer" not in answer.text and "unknown" not in answer.text  # the hook's words
    assert client.made == []  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "hostile", ["", "ACME", "../globex", "acme; DROP SCHEMA public", "a" * 300, "acme\x00", 7]
)
def test_a_hook_naming_no_tenant_id_stores_nothing_and_tells_the_client_nothing_of_it(
    tenants: Tenants, hostile: object, caplog: pytest.LogCaptureFixture
) -> None:
    app = TenantsIntake(
        tenants,
        lambda store: Inbox("orders-http", store, order_received),
        tenant_of=lambda r: hostile,  # type: ignore[arg-type, return-value]
    )
    with caplog.at_level(logging.ERROR, logger="eventcraft.messaging"):
        answer = _post(TestClient(app), "Bearer acme-token", "k-1", 7)
    assert answer.status_code == 500
    if isinstance(hostile, str) and hostile:
        assert hostile not in answer.text and hostile not in caplog.text
    assert list(Path(tenants.place_of("acme").name).parent.iterdir()) == []


def test_concurrent_retries_from_two_tenants_store_one_message_in_each(
    client: TestClient, tenants: Tenants
) -> None:
    # Senders of both tenants retry the same key at once, over one store open at a time.
    answers: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def send(token: str) -> None:
        start.wait(30)
        for _ in range(5):
            status = _post(client, token, "k-1", 7).status_code
            with lock:
                answers.append(status)

    threads = [threading.Thread(target=send, args=(token,)) for token in list(TOKENS) * 4]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert answers == [202] * 40
    assert _orders(tenants, "acme") == _orders(tenants, "globex") == [("order-7", 7)]


def test_its_parts_are_checked_when_it_is_made(tenants: Tenants) -> None:
    inbox = lambda store: Inbox("orders-http", store, order_received)  # noqa: E731
    with pytest.raises(MessagingConfigError, match="Tenants"):
        TenantsIntake("sqlite:///{tenant}.db", inbox, tenant_of=tenant_of)  # type: ignore[arg-type]
    with pytest.raises(MessagingConfigError, match="tenant_of"):
        TenantsIntake(tenants, inbox, tenant_of="acme")  # type: ignore[arg-type]
    with pytest.raises(MessagingConfigError, match="max_body"):
        TenantsIntake(tenants, inbox, tenant_of=tenant_of, max_body=0)
    with pytest.raises(MessagingConfigError, match="content_types"):
        TenantsIntake(tenants, inbox, tenant_of=tenant_of, content_types="json")
