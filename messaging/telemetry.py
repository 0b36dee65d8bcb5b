"""OpenTelemetry for relays: messages published, outages, and gauges of pause and lag.

Nothing is recorded until the application configures an OpenTelemetry SDK
(extra `otel`); without one each call costs a global lookup. The gauges read
the relays of this process that are open.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from eventcraft.eventstore import telemetry as store_telemetry
from eventcraft.projections import lag_of

if TYPE_CHECKING:
    from opentelemetry.metrics import CallbackOptions, Meter, Observation

    from .relay import Relay

SCOPE = "eventcraft.messaging"
RELAY = "eventcraft.relay"
DESTINATION = "messaging.destination.name"

log = logging.getLogger("eventcraft.messaging")

_relays: weakref.WeakSet[Relay] = weakref.WeakSet()


class _Instruments:
    def __init__(self, meter: Meter) -> None:
        self.published = meter.create_counter(
            "eventcraft.relay.published", "{message}", "Messages the broker confirmed, per relay"
        )
        self.outages = meter.create_counter(
            "eventcraft.relay.outages", "{outage}", "Times a relay's broker became unavailable"
        )
        meter.create_observable_gauge(
            "eventcraft.relay.paused",
            [_paused],
            "1",
            "1 while a relay is paused by a broker outage, else 0",
        )
        meter.create_observable_gauge(
            "eventcraft.relay.lag",
            [_lag],
            "{event}",
            "Positions of the log between a relay's checkpoint and the head",
        )


SCOPED = store_telemetry.Scoped(SCOPE, _Instruments)


def watch(relay: Relay) -> None:
    """Report `relay` in the gauges while it is open."""
    _relays.add(relay)
    SCOPED.instruments()


def unwatch(relay: Relay) -> None:
    _relays.discard(relay)


def published(relay: Relay, count: int) -> None:
    instruments = SCOPED.instruments()
    if instruments is not None and count:
        instruments.published.add(count, _where(relay))


def outage(relay: Relay) -> None:
    instruments = SCOPED.instruments()
    if instruments is not None:
        instruments.outages.add(1, _where(relay))


def _where(relay: Relay) -> dict[str, Any]:
    return {RELAY: relay.name, DESTINATION: relay.publisher.broker}


def _paused(options: CallbackOptions) -> Iterable[Observation]:
    from opentelemetry.metrics import Observation

    return [Observation(int(r.paused_since is not None), _where(r)) for r in list(_relays)]


def _lag(options: CallbackOptions) -> Iterable[Observation]:
    from opentelemetry.metrics import Observation

    found = []
    for relay in list(_relays):
        try:
            head = relay.store.high_water_mark()
            behind = lag_of(relay.store, relay.selection, relay.position, head)
        except Exception:
            log.debug("relay %r: no lag for the lag gauge", relay.name, exc_info=True)
            continue
        found.append(Observation(behind.events, _where(relay)))
    return found
