"""Every backend passes the shipped conformance suite, through both APIs: the backend
and the API are fixture parameters, the test bodies are one. PostgreSQL runs it twice:
straight, and through PgBouncer in transaction pooling (`tests/pgbouncer.py`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

import pytest
from eventcraft.eventstore import EventStore
from eventcraft.eventstore.blocking import BlockingEventStore
from eventcraft.eventstore.testing import EventStoreConformance


class TestEveryBackend(EventStoreConformance):
    @pytest.fixture(
        params=[
            "memory",
            "sqlite",
            "postgres",
            # Three minutes on a loaded 2-core machine, a third more than straight to it.
            pytest.param("postgres-via-pgbouncer", marks=pytest.mark.slow),
        ]
    )
    def store_url(self, request: pytest.FixtureRequest) -> str:
        """A URL for a new, empty store on each backend in turn (the suite's `store_url`
        with PostgreSQL behind PgBouncer besides)."""
        if request.param == "memory":
            return "memory://"
        names = {"sqlite": "sqlite_url", "postgres": "pg_url"}
        return str(request.getfixturevalue(names.get(request.param, "pgbouncer_url")))

    @pytest.fixture(params=["sync", "async"])
    def store(self, request: pytest.FixtureRequest, store_url: str) -> Iterator[EventStore]:
        """A new, empty store: `EventStore`, or `AsyncEventStore` behind a blocking face."""
        if request.param == "sync":
            with EventStore.open(store_url) as opened:
                yield opened
        else:
            with BlockingEventStore.open(store_url) as blocking:
                yield cast(EventStore, blocking)
