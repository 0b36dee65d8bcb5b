"""A store that reads from a hot standby passes the shipped conformance suite, through
both APIs: every read after the suite's own writes goes to the standby once it shows them
(read your writes), every write to the primary."""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

import pytest
from eventcraft.eventstore import EventStore
from eventcraft.eventstore.blocking import BlockingEventStore
from eventcraft.eventstore.postgres import replicas
from eventcraft.eventstore.testing import EventStoreConformance

from .conftest import Pair


@pytest.mark.slow
class TestThroughAReplica(EventStoreConformance):
    @pytest.fixture
    def store_url(self, pair: Pair) -> str:
        """A new, empty store on the primary, read from the standby."""
        return replicas.with_replicas(pair.primary_url, [pair.standby_url])

    @pytest.fixture(params=["sync", "async"])
    def store(self, request: pytest.FixtureRequest, store_url: str) -> Iterator[EventStore]:
        if request.param == "sync":
            with EventStore.open(store_url) as opened:
                yield opened
        else:
            with BlockingEventStore.open(store_url) as blocking:
                yield cast(EventStore, blocking)
