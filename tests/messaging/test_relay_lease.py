"""A relay keeps its lease through a batch the broker is slow to confirm: no other process
publishes the same events meanwhile."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from eventcraft.eventstore import EventStore, NewEvent
from eventcraft.messaging import OutgoingMessage, Publisher, Relay
from eventcraft.projections import CheckpointTable, PartitionedRunner

from .brokers import wait_for


class HeldPublisher(Publisher):
    """A broker that confirms what it is given, and with `hold` only once the test lets it."""

    broker = "held"

    def __init__(self, *, hold: bool) -> None:
        self.hold = hold
        self.entered = threading.Event()
        """A batch is being published."""
        self.go = threading.Event()
        self.published: list[str] = []

    def publish(self, messages: Sequence[OutgoingMessage]) -> None:
        self.entered.set()
        if self.hold:
            assert self.go.wait(60), "the test never let the batch go"
        self.published.extend(m.message_id for m in messages)

    def close(self) -> None:
        self.go.set()


def test_a_batch_that_outlasts_its_lease_is_published_by_its_relay_alone(
    shared_store_url: str,
) -> None:
    with EventStore.open(shared_store_url) as store:
        store.append("order-1", [NewEvent("OrderPlaced", {"n": n}) for n in range(5)])
        ids = [str(e.id) for e in store.read_all()]
        held, other = HeldPublisher(hold=True), HeldPublisher(hold=False)
        renewals: list[float] = []
        with (
            Relay("out", store, held, lease_ttl=1.0) as first,
            Relay("out", store, other, lease_ttl=1.0) as second,
        ):
            first.on_renew = lambda: renewals.append(time.time())
            publishing = threading.Thread(target=first.catch_up)
            publishing.start()
            try:
                assert held.entered.wait(10)
                with first.database.reading() as connection:
                    row = CheckpointTable(connection).read("out")
                assert row is not None and row.owner == first.owner
                lapse = row.lease_until or 0.0  # unless the first relay renews it
                tried_after: list[float] = []

                def second_tries_after_the_lapse() -> bool:
                    tried_at = time.time()
                    second.step()
                    if tried_at > lapse:
                        tried_after.append(tried_at)
                    return len(tried_after) >= 2

                # The first relay's batch is held past its whole lease, the second relay
                # trying for the lease all along; it must find the lease still held.
                wait_for(second_tries_after_the_lapse, 20, "the second relay to try")
                assert other.published == []
                with first.database.reading() as connection:
                    row = CheckpointTable(connection).read("out")
                assert row is not None and row.owner == first.owner and row.position == 0
                assert (row.lease_until or 0.0) > tried_after[-1]
            finally:
                held.go.set()
                publishing.join(30)
            assert not publishing.is_alive()
            assert renewals and renewals[0] < lapse
            second.catch_up()  # the lease is free again: nothing is left to publish
            assert second.status().position == first.status().position == 5
    assert held.published == ids
    assert other.published == []


def test_a_relay_in_a_partition_group_renews_the_membership_with_its_lease(
    sqlite_url: str,
) -> None:
    """A relay's long batch renews its lease half-way; in a partition group the membership
    must be renewed with it, or the other members count this process gone meanwhile."""
    with EventStore.open(sqlite_url) as store:
        relays = Relay.partitioned("split", store, lambda: HeldPublisher(hold=False), partitions=2)
        try:
            with PartitionedRunner(store, "split", relays) as runner:
                assert [relay.on_renew for relay in relays] == [runner._keep_membership] * 2
        finally:
            for relay in relays:
                relay.close()
