"""A store's read replica's lag is a metric: `eventcraft.store.replica.lag` (positions
behind the primary's high-water mark) and `.bytes` (WAL not replayed), by replica."""

from __future__ import annotations

import pytest
from eventcraft.eventstore import EventStore, NewEvent
from eventcraft.eventstore.postgres import replicas

from ...replica_server import caught_up, pause_replay, resume_replay
from ...telemetry.conftest import Telemetry, telemetry  # noqa: F401 (the fixture)
from .conftest import Pair

# slow: A primary and a hot standby of their own, started for the module.
pytestmark = pytest.mark.slow


def test_the_replica_lag_is_a_metric(pair: Pair, telemetry: Telemetry) -> None:  # noqa: F811
    url = replicas.with_replicas(pair.primary_url, [pair.standby_url])
    with EventStore.open(pair.primary_url) as writer, EventStore.open(url) as store:
        writer.append("order-1", [NewEvent("Placed", {})])
        caught_up(pair.primary, pair.standby)
        pause_replay(pair.standby)
        try:
            writer.append("order-2", [NewEvent("Placed", {}), NewEvent("Paid", {})])
            store.log_status()
            (lag,) = telemetry.points("eventcraft.store.replica.lag")
            (behind,) = telemetry.points("eventcraft.store.replica.lag.bytes")
        finally:
            resume_replay(pair.standby)
        assert lag.value == 2
        assert behind.value > 0
        replica = f"127.0.0.1:{pair.standby.port}/{pair.standby_url.rsplit('/', 1)[1]}"
        assert lag.attributes == {"eventcraft.replica": replica}
        caught_up(pair.primary, pair.standby)
        store.log_status()
        (lag,) = telemetry.points("eventcraft.store.replica.lag")
        assert lag.value == 0
