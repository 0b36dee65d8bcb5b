"""Every relay that ever ran against a store, as another process sees it: the command
line, a console. A relay's process alone knows whether it is publishing or paused by
an outage; it says so in its state row (`relay_state.py`) when that changes, and records
its selection beside it (`relay_selection.py`), so that its lag is counted here as it
counts it. Its checkpoint and lease are in the projections' table, read through the
projections' face.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from eventcraft.eventstore import EventStore
from eventcraft.projections import Database, Lag, checkpoint_leases, lag_of

from . import relay_selection, relay_state


@dataclass(frozen=True)
class RelayRecord:
    """A relay as its rows show it to another process: its checkpoint against the log,
    and its state as it last said.

    A relay says its state whenever it changes, however it is run (`start()`, `run()`,
    `catch_up()`, `step()`): running, paused, stopped (see `Relay`). One that never held
    its lease, and so never ran, is not listed.

    Example::

        import time

        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.messaging import Publisher, Relay, RelayRecord, relay_records

        class Nowhere(Publisher):  # stands in for a broker's publisher
            broker = "nowhere"

            def publish(self, messages):
                pass

            def close(self):
                pass

        store = EventStore.open("sqlite:///shop.db")
        store.append("order-7", [NewEvent("OrderPlaced", {"cents": 1600})])
        with Relay("orders-out", store, Nowhere()).start() as relay:  # follows the log in a thread
            while relay.status().lag_events:
                time.sleep(0.01)
            [record] = relay_records(store)  # what `eventcraft messaging relays` shows
            assert isinstance(record, RelayRecord) and record.owner == relay.owner
            assert (record.state, record.position, record.lag_events) == ("running", 1, 0)
    """

    name: str
    broker: str
    """The broker as the relay shows it: kind and address, no password."""
    state: str
    """"running", "paused" (its broker is unavailable) or "stopped", as it last said."""
    position: int
    """Every selected event up to here is confirmed by the broker."""
    head: int
    """The log's high-water mark when the record was read."""
    lag_events: int
    """Events after the checkpoint, up to the head, that the relay selects, as its
    `status()` counts them: at most `LAG_COUNTED` (then `lag_capped`). A relay whose row
    holds no selection (it last ran under a release that did not record it) lags by
    the positions behind the head, a bound, until it runs again."""
    lag_capped: bool
    """More events wait than `lag_events`: the count stopped at `LAG_COUNTED`."""
    paused_since: datetime | None
    """When the current outage began, while it is paused."""
    last_error: str | None
    """What the broker last answered with, if the relay is paused."""
    outages: int
    """Outages the relay's process has met since it started."""
    owner: str | None
    """The process holding its lease, if the lease is current."""
    updated_at: datetime
    """When the relay last wrote its state."""


def relay_records(store: EventStore, database: Database | None = None) -> list[RelayRecord]:
    """Every relay that ever ran against `store`, by name, its rows read in `database`
    (None: the store's own); its lag counted from the selection it records beside its
    state, reading nothing else.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.messaging import Publisher, Relay, relay_records

        class Nowhere(Publisher):  # stands in for a broker's publisher
            broker = "nowhere"

            def publish(self, messages):
                pass

            def close(self):
                pass

        store = EventStore.open("sqlite:///shop.db")
        store.append("order-7", [NewEvent("OrderPlaced", {"cents": 1600})])
        with Relay("orders-out", store, Nowhere()) as relay:
            relay.catch_up()  # running while it publishes, stopped once it returns
        store.append("order-8", [NewEvent("OrderPlaced", {"cents": 900})])

        # Another process (a health check, say) reads what every relay last said:
        relays = [(r.name, r.state, r.lag_events) for r in relay_records(store)]
        assert relays == [("orders-out", "stopped", 1)]
    """
    head = store.high_water_mark()
    opened = Database.of(database, store)
    try:
        with opened.reading() as connection:
            states = relay_state.listed(connection)
        leases = checkpoint_leases(opened, [s.name for s in states])
    finally:
        if database is None:
            opened.close()
    records = []
    for state in states:
        position, owner = leases.get(state.name, (0, None))
        behind = _lag(store, state, position, head)
        records.append(
            RelayRecord(
                name=state.name,
                broker=state.broker,
                state=state.state,
                position=position,
                head=head,
                lag_events=behind.events,
                lag_capped=behind.capped,
                paused_since=_moment(state.paused_since),
                last_error=state.last_error,
                outages=state.outages,
                owner=owner,
                updated_at=datetime.fromtimestamp(state.updated_at, UTC),
            )
        )
    return records


def _lag(store: EventStore, state: relay_state.RelayState, position: int, head: int) -> Lag:
    selection = relay_selection.selection_of(state.name, state.selection)
    if selection is None:
        return Lag(max(head - position, 0), False, 0.0)
    return lag_of(store, selection, position, head)


def _moment(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)
