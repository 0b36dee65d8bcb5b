"""Processes for the messaging tests (spawned: module-level functions only)."""

from __future__ import annotations

from eventcraft.eventstore import EventStore
from eventcraft.messaging import Relay

from .conftest import make_publisher


def relay_forever(store_url: str, spec: str, batch_size: int) -> None:
    """Follow the log and publish it until killed; a short lease so a successor takes over."""
    kind, url, name = spec.split("|")
    with EventStore.open(store_url) as store:
        relay = Relay(
            "killed-relay",
            store,
            make_publisher(kind, url, name),
            batch_size=batch_size,
            lease_ttl=1.0,
            max_backoff=0.5,
        )
        relay.run()
