"""Every backend passes the shipped conformance suite, through both APIs: the backend
and the API are fixture parameters, the test bodies are one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

import pytest
from eventcraft.eventstore import EventStore
from eventcraft.eventstore.blocking import BlockingEventStore
from eventcraft.eventstore.testing import EventStoreConformance


class TestEveryBackend(EventStoreConformance):
    @pytest.fixture(params=["sync", "async"])
    def store(self, request: pytest.FixtureRequest, store_url: str) -> Iterator[EventStore]:
        """A new, empty store: `EventStore`, or `AsyncEventStore` behind a blocking face."""
        if request.param == "sync":
            with EventStore.open(store_url) as opened:
                yield opened
        else:
            with BlockingEventStore.open(store_url) as blocking:
                yield cast(EventStore, blocking)
