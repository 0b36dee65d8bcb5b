"""Request-reply over the log: send a command, wait for the event that answers it.

The reply is the first event of one of `reply_types`, appended after the
command, whose `causation_id` is the command's id (what
`domain.caused_by(command)` gives a handler's events). The wait sleeps on
the store's own wake-up (`wait_for_events`), never on a fixed interval.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from eventcraft.eventstore import ANY, EventStore, NewEvent, RecordedEvent

from .errors import ReplyTimeout


def request(
    store: EventStore,
    stream_id: str,
    command: NewEvent,
    *,
    reply_types: Sequence[str],
    timeout: float,
) -> RecordedEvent:
    """Append `command` to `stream_id`, then return its reply; `ReplyTimeout` when it is late.

    Example::

        import threading

        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.sagas import request

        store = EventStore.open("sqlite:///shop.db")

        def courier_service():  # another service: it answers a booking
            store.wait_for_events(0, timeout=10)
            (booking,) = store.read_all(types=["BookCourier"])
            answer = {"causation_id": str(booking.id)}  # what says it answers the booking
            booked = NewEvent("CourierBooked", {"slot": "9:00"}, answer)
            store.append(f"courier-{booking.data['parcel']}", [booked])

        courier = threading.Thread(target=courier_service)
        courier.start()
        command = NewEvent("BookCourier", {"parcel": 7})
        reply = request(store, "parcel-7", command, reply_types=["CourierBooked"], timeout=10)
        assert reply.data == {"slot": "9:00"} and reply.stream_id == "courier-7"
        courier.join()
        store.close()
    """
    after = store.append(stream_id, [as_request(command)], expected_version=ANY).positions[0]
    wanted = str(command.id)
    deadline = time.monotonic() + timeout
    while True:
        # Taken before the read, which reads at least this far: the next wait
        # starts past every event it covered, not only past the replies it found,
        # or events of other types would wake each wait at once.
        covered = store.high_water_mark()
        for event in store.read_all(after=after, types=list(reply_types)):
            if answers(event, wanted):
                return event
            covered = max(covered, event.position)
        after = max(after, covered)
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not store.wait_for_events(after, remaining):
            raise ReplyTimeout(command.type, wanted, list(reply_types), timeout)


def as_request(command: NewEvent) -> NewEvent:
    """`command` as a request sends it: the start of a conversation of its own."""
    metadata = {"correlation_id": str(command.id), **command.metadata}
    return NewEvent(command.type, command.data, metadata, command.id)


def answers(event: RecordedEvent, wanted: str) -> bool:
    """Whether `event` (of a reply type) answers the command whose id is `wanted`."""
    return event.metadata.get("causation_id") == wanted
