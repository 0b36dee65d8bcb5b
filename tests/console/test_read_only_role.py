"""The console over a PostgreSQL store opened by a role that may only read (USAGE on the
schema, SELECT on its tables: the manual's 'Roles and privileges'): every page renders."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from eventcraft.eventstore import EventStore
from starlette.testclient import TestClient

from eventcraft.console import create_app

from ..cli.apps import shop
from ..roles import schema_of, store_roles
from .conftest import LOCAL, fill_console


@pytest.fixture
def reader_console(pg_url: str) -> Iterator[TestClient]:
    """The console of the shop (its history, sagas and projections, made and run by the
    migration role), over the store opened by the read-only role."""
    with store_roles(schema_of(pg_url)) as roles:
        with EventStore.open(roles.url(roles.migrator)) as store:
            fill_console(store)
        with (
            EventStore.open(roles.url(roles.reader)) as store,
            TestClient(create_app(store, shop), base_url=LOCAL) as client,
        ):
            yield client


@pytest.mark.parametrize(
    ("path", "shows"),
    [
        ("/", "order-notes"),
        ("/log", "ParcelSent"),
        ("/streams", "shipment-1"),
        ("/stream?id=order-1", "OrderPaid"),
        ("/events/1", "order-1"),
        ("/trace?correlation=checkout-1", "ParcelSent"),
        ("/projections", "order-notes"),
        ("/projections/order-notes", "negative amount"),
        ("/sagas", "parked"),
        ("/messaging", "Messaging"),
        ("/catalog", "OrderPaid"),
        ("/catalog/OrderPaid", "OrderPaid"),
    ],
)
def test_every_page_renders_for_a_role_that_may_only_read(
    reader_console: TestClient, path: str, shows: str
) -> None:
    """The store's open was refused (CREATE SCHEMA IF NOT EXISTS), and then the projection
    pages: opening a runner to read its status locked the checkpoint rows (SELECT ... FOR
    UPDATE, which needs UPDATE)."""
    response = reader_console.get(path)
    assert response.status_code == 200, response.text[:500]
    assert shows in response.text
