"""Every backend passes the shipped conformance suite, through both APIs: the backend
and the API are fixture parameters, the test bodies are one. PostgreSQL runs it three times:
straight, through PgBouncer in transaction pooling (`tests/pgbouncer.py`), and with its
events table partitioned by position (`postgres/partitions.py`)."""

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
            # Minutes long, as the postgres run is (about as long, interleaved, on a
            # lightly loaded machine): `-m "not slow"` leaves this second run out.
            pytest.param("postgres-via-pgbouncer", marks=pytest.mark.slow),
            # Events partitioned by ten positions, so that tests cross partitions' bounds:
            # four minutes here (500 tests), for the partitions each store makes.
            pytest.param("postgres-partitioned", marks=pytest.mark.slow),
        ]
    )
    def store_url(self, request: pytest.FixtureRequest) -> str:
        """A URL for a new, empty store on each backend in turn (the suite's `store_url`
        with PostgreSQL behind PgBouncer besides)."""
        if request.param == "memory":
            return "memory://"
        if request.param == "postgres-partitioned":
            return f"{request.getfixturevalue('pg_url')}&partition_events=10"
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
