"""The standby a store reads from is promoted (the primary lost, say): the store's readers
go on from where they were, by the primary's rule on the promoted server, skipping nothing
appended there, while its appends, which go to the old primary, fail as unavailable."""

from __future__ import annotations

import psycopg
import pytest
from eventcraft.eventstore import EventStore, NewEvent, StoreUnavailable

from ...replica_server import caught_up, promote, replica_pair
from ..held_appends import append_uncommitted

# slow: A primary and a hot standby of their own, started for the module.
pytestmark = pytest.mark.slow


def test_a_store_reads_on_through_its_replicas_promotion() -> None:
    with replica_pair() as (primary, standby):
        with EventStore.open(primary.url) as writer:
            before = [writer.append(f"order-{n}", [NewEvent("Placed", {})]) for n in range(5)]
        caught_up(primary, standby)
        with EventStore.open(primary.url, replicas=[standby.url]) as store:
            seen = [e.position for e in store.read_all()]
            assert seen == [r.positions[0] for r in before]
            primary.stop("immediate")  # the primary is lost...
            promote(standby)  # ...and its standby takes over
            with (
                EventStore.open(standby.url) as promoted,
                psycopg.connect(standby.url) as held,
            ):
                first = promoted.append("order-9", [NewEvent("Placed", {})]).positions[0]
                gap = append_uncommitted(held, "held-1")[0]
                later = promoted.append("order-10", [NewEvent("Placed", {})]).positions[0]
                assert seen[-1] < first < gap < later  # no position of the old primary reused
                # The store's reader stops at the gap an append on the new primary holds...
                assert [e.position for e in store.read_all(after=seen[-1])] == [first]
                status = store.log_status()  # the promoted server's, which holds the log now
                assert status.replica is not None and status.replica.promoted
                assert (status.high_water_mark, status.head) == (first, later)
                held.commit()
                # ...and passes it once that append commits.
                assert [e.position for e in store.read_all(after=first)] == [gap, later]
            with pytest.raises(StoreUnavailable):
                store.append("order-11", [NewEvent("Placed", {})])
