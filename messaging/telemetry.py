"""OpenTelemetry for relays: messages published, outages, and gauges of pause and lag.

Nothing is recorded until the application configures an OpenTelemetry SDK
(extra `otel`); without one each call costs a global lookup. The gauges read
the relays of this process that are open.

The log records of relays, inboxes and the HTTP intake tell an exception by its
type and where it was raised (`told`, `traced`), never by its message, which
may quote a message's body or an event's data, personal fields included: the
message is kept in an error store, which a forget erases (an inbox's failed
messages, a relay's parked events), or in the exception raised to a caller.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from eventcraft.eventstore import telemetry as store_telemetry
from eventcraft.projections import bare_traceback, lag_of

if TYPE_CHECKING:
    from opentelemetry.metrics import CallbackOptions, Meter, Observation

    from .relay import Relay

SCOPE = "eventcraft.messaging"
RELAY = "eventcraft.relay"
DESTINATION = "messaging.destination.name"

log = logging.getLogger("eventcraft.messaging")

FAILED_KEPT = "the inbox's error store (eventcraft messaging failed)"
"""Where the message of a failed incoming message's error is kept."""
PARKED_KEPT = "the relay's parked events, in the projections' error store"
"""Where a broker's refusal of a relayed event is kept."""

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


def told(error: BaseException, kept: str) -> str:
    """`error` for a log record: its type and where it was raised, and `kept`, where its
    message is (`store_telemetry.told`)."""
    return store_telemetry.told(error, kept)


def traced(error: BaseException, kept: str) -> str:
    """A loop's unexpected `error` for its log record: `told`, then its traceback of frames
    and types (`bare_traceback`), as `log.exception` would show it but for the messages."""
    return f"{store_telemetry.told(error, kept)}\n{bare_traceback(error).rstrip()}"


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
