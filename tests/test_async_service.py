"""The example async service, over HTTP, on SQLite and PostgreSQL: commands keyed by the
client's Idempotency-Key store once however often they are sent, and reads see them."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator

import httpx2
import pytest
from eventcraft.eventstore import EventStore
from starlette.testclient import TestClient

from examples.async_service import create_app


@pytest.fixture(params=["sqlite", "postgres"])
def service_url(request: pytest.FixtureRequest) -> str:
    name = "sqlite_url" if request.param == "sqlite" else "pg_url"
    return str(request.getfixturevalue(name))


@pytest.fixture
def client(service_url: str) -> Iterator[TestClient]:
    with TestClient(create_app(service_url)) as test_client:
        yield test_client


def key() -> dict[str, str]:
    return {"Idempotency-Key": str(uuid.uuid4())}


def test_a_deposit_sent_again_stores_nothing_new_and_answers_the_same_position(
    client: TestClient, service_url: str
) -> None:
    opened = client.post("/accounts/ann", json={"owner": "Ann"}, headers=key())
    assert opened.status_code == 201
    sent = key()
    first = client.post("/accounts/ann/deposits", json={"amount_cents": 500}, headers=sent)
    again = client.post("/accounts/ann/deposits", json={"amount_cents": 500}, headers=sent)
    assert first.status_code == again.status_code == 201
    assert first.json() == again.json() == {"position": 2, "version": 2}
    read = client.get("/accounts/ann", params={"after": first.json()["position"]})
    assert read.json() == {"owner": "Ann", "balance_cents": 500, "position": 2}
    with EventStore.open(service_url) as store:
        assert [e.type for e in store.read_stream("account-ann")] == [
            "AccountOpened",
            "MoneyDeposited",
        ]
        assert store.read_event(uuid.UUID(sent["Idempotency-Key"])) is not None


def test_a_text_key_works_as_well_as_a_uuid_and_may_not_be_reused_elsewhere(
    client: TestClient,
) -> None:
    client.post("/accounts/ann", json={"owner": "Ann"}, headers=key())
    client.post("/accounts/bob", json={"owner": "Bob"}, headers=key())
    sent = {"Idempotency-Key": "order-42 payment"}
    first = client.post("/accounts/ann/deposits", json={"amount_cents": 7}, headers=sent)
    assert client.post("/accounts/ann/deposits", json={"amount_cents": 7}, headers=sent).json() == (
        first.json()
    )
    elsewhere = client.post("/accounts/bob/deposits", json={"amount_cents": 7}, headers=sent)
    assert elsewhere.status_code == 422
    assert client.get("/accounts/bob", params={"after": 3}).json()["balance_cents"] == 0


def test_bad_requests_are_refused_and_store_nothing(client: TestClient) -> None:
    assert client.post("/accounts/ann", json={"owner": "Ann"}).status_code == 400  # no key
    assert client.post("/accounts/ann", json={"owner": ""}, headers=key()).status_code == 422
    refused = client.post("/accounts/zed/deposits", json={"amount_cents": 5}, headers=key())
    assert refused.status_code == 404
    client.post("/accounts/ann", json={"owner": "Ann"}, headers=key())
    again = client.post("/accounts/ann", json={"owner": "Ann"}, headers=key())
    assert again.status_code == 409
    bad = client.post("/accounts/ann/deposits", json={"amount_cents": -1}, headers=key())
    assert bad.status_code == 422
    assert client.get("/accounts/zed").status_code == 404
    assert client.get("/accounts/ann", params={"after": "x"}).status_code == 422
    assert client.get("/accounts/ann", params={"after": 1}).json()["balance_cents"] == 0


def test_the_same_request_sent_by_many_clients_at_once_is_stored_once(service_url: str) -> None:
    app = create_app(service_url)

    async def clients() -> AsyncIterator[httpx2.AsyncClient]:
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://bank") as client:
            yield client

    async def test() -> None:
        async with app.router.lifespan_context(app):
            async for client in clients():
                await client.post("/accounts/ann", json={"owner": "Ann"}, headers=key())
                sent = key()
                url = "/accounts/ann/deposits"
                answers = await asyncio.gather(
                    *(client.post(url, json={"amount_cents": 5}, headers=sent) for _ in range(20)),
                    *(client.post(url, json={"amount_cents": 1}, headers=key()) for _ in range(10)),
                )
                keyed = {tuple(sorted(a.json().items())) for a in answers[:20]}
                assert len(keyed) == 1 and all(a.status_code == 201 for a in answers)
                last = max(a.json()["position"] for a in answers)
                read = await client.get("/accounts/ann", params={"after": last})
                assert read.json()["balance_cents"] == 5 + 10

    asyncio.run(asyncio.wait_for(test(), 60))
