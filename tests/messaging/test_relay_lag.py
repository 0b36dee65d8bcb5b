"""A relay's lag counts the events its selection takes after its checkpoint, as a
projection's does: 0 on a log of events it does not publish."""

from __future__ import annotations

from eventcraft.eventstore import EventStore
from eventcraft.messaging import RabbitMQPublisher, Relay

from tests.console.lag_app import noise, wanted_events

NOWHERE = "amqp://guest:guest@127.0.0.1:9/"
"""No broker: the relay is not started, only asked where it stands."""


def test_a_relays_lag_counts_only_the_events_it_selects(shared_store_url: str) -> None:
    with (
        EventStore.open(shared_store_url) as store,
        Relay(
            "orders-out", store, RabbitMQPublisher(NOWHERE), categories="order", types="Wanted"
        ) as relay,
        Relay("everything-out", store, RabbitMQPublisher(NOWHERE)) as everything,
    ):
        noise(store)
        assert (relay.status().lag_events, relay.status().lag_capped) == (0, False)
        assert everything.status().lag_events == store.high_water_mark()
        wanted_events(store, 3, kept=0)
        assert relay.status().lag_events == 3
