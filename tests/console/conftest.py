"""The console on a store with known content: the command line's shop (its history, its
sagas, its projections caught up as far as they go), served in this process."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from eventcraft.eventstore import EventStore
from starlette.testclient import TestClient

from eventcraft.console import create_app
from eventcraft.operations import projections

from ..cli.apps import fill_shop, run_sagas, shop

POISON_AT = 7
"""The position of the event `order-notes` stopped on and parked."""

Client = Callable[..., TestClient]


def fill_console(store: EventStore) -> None:
    """The shop's history and sagas, its projections caught up: `order-notes` stopped at 7,
    sagas f1 completed, p1 and p2 parked, d1 running."""
    assert fill_shop(store) == POISON_AT
    run_sagas(store)
    projections.catch_up(store, shop)


@pytest.fixture
def shop_store(store: EventStore) -> EventStore:
    """The shop on each backend in turn: memory, SQLite, PostgreSQL."""
    fill_console(store)
    return store


@pytest.fixture
def client(shop_store: EventStore) -> Iterator[Client]:
    """A client of the console over `shop_store`: `client(allow_actions=True, token=...)`."""
    clients: list[TestClient] = []

    def make(**options: object) -> TestClient:
        made = TestClient(create_app(shop_store, shop, **options))  # type: ignore[arg-type]
        clients.append(made)
        return made

    yield make
    for made in clients:
        made.close()
