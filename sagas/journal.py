"""A saga instance's stream: read into a `SagaState`, and appended to, move by move.

The stream is the instance's only state. Each append expects the version
the move was decided on, so of two orchestrators that decide at once one
records and the other, told its state is stale, reloads.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime

import orjson
from eventcraft.eventstore import EventStore, NewEvent, RecordedEvent, WrongExpectedVersion

from . import personal, telemetry
from .index import SAGA_CATEGORY
from .state import SagaState

log = logging.getLogger("eventcraft.sagas")


def stream_of(name: str, saga_id: str) -> str:
    """The stream of the instance `saga_id` of the saga `name`.

    Example::

        from eventcraft.eventstore import EventStore
        from eventcraft.sagas import Orchestrator, Saga, Step, stream_of

        def reserve(data, context): ...

        fulfilment = Saga("fulfilment", [Step("reserve", reserve)])
        store = EventStore.open("sqlite:///shop.db")
        orchestrator = Orchestrator(store, [fulfilment])
        orchestrator.start(fulfilment, {"sku": "tea"}, saga_id="order-1")
        orchestrator.run_pending()
        stream = stream_of("fulfilment", "order-1")
        assert stream == "saga-fulfilment:order-1"
        assert [event.type for event in store.read_stream(stream)] == [
            "SagaStarted", "StepStarted", "StepSucceeded", "SagaCompleted",
        ]
        store.close()
    """
    return f"{SAGA_CATEGORY}-{name}:{saga_id}"


def saga_of_stream(stream: str) -> tuple[str, str]:
    """(saga name, saga id) of an instance's stream.

    Example::

        from eventcraft.eventstore import EventStore
        from eventcraft.sagas import SAGA_CATEGORY, Orchestrator, Saga, Step, saga_of_stream

        def reserve(data, context): ...
        def refund(data, context): ...

        fulfilment = Saga("fulfilment", [Step("reserve", reserve)])
        refunding = Saga("refund", [Step("refund", refund)])
        store = EventStore.open("sqlite:///shop.db")
        orchestrator = Orchestrator(store, [fulfilment, refunding])
        orchestrator.start(fulfilment, {"sku": "tea"}, saga_id="order-1")
        orchestrator.start(refunding, {"cents": 900}, saga_id="order-1")
        streams = store.list_streams(category=SAGA_CATEGORY)
        found = [saga_of_stream(info.stream_id) for info in streams]
        assert found == [("fulfilment", "order-1"), ("refund", "order-1")]
        store.close()
    """
    name, _, saga_id = stream.removeprefix(f"{SAGA_CATEGORY}-").partition(":")
    return name, saga_id


class Journal:
    """Reads and appends the streams of saga instances, for the orchestrator `owner`."""

    def __init__(self, store: EventStore, owner: str) -> None:
        self.store = store
        self.owner = owner

    def record(self, current: SagaState, events: list[NewEvent], *, defer: bool = False) -> bool:
        """Append the deferred events and `events` if the stream is still where `current`
        was read; False if another orchestrator moved it (`current` is then stale).

        `defer` holds `events` back, to go with the next append: `current` evolves at
        once, as if they were written.
        """
        stamped = [
            NewEvent(e.type, e.data, {"correlation_id": current.correlation_id}, e.id)
            for e in events
        ]
        if defer:
            self.evolve(current, stamped, current.version + 1, [0] * len(stamped))
            current.unsaved.extend(stamped)
            return True
        batch = [*current.unsaved, *stamped]
        if not batch:
            return True
        try:
            done = self.store.append(
                current.stream_id, batch, expected_version=current.version - len(current.unsaved)
            )
        except WrongExpectedVersion:
            log.info(
                "%s moved on under %s; reloading",
                current.stream_id,
                self.owner,
                extra=telemetry.log_fields(current),
            )
            current.stale = True
            return False
        finally:
            current.unsaved.clear()
        telemetry.recorded(current, batch, getattr(self.store, "tenant", None))
        # Evolve with what was just written rather than read the stream again.
        written = done.positions[len(done.positions) - len(stamped) :]
        self.evolve(current, stamped, current.version + 1, written)
        return True

    @staticmethod
    def evolve(
        current: SagaState, events: list[NewEvent], first: int, positions: Sequence[int]
    ) -> None:
        """`current` after `events`, their JSON round-tripped as the store returns it."""
        now = datetime.now(UTC)
        for offset, (event, position) in enumerate(zip(events, positions, strict=True)):
            stored = orjson.loads(orjson.dumps(personal.stored(event.data)))
            current.evolve(
                RecordedEvent(
                    event.id,
                    current.stream_id,
                    first + offset,
                    position,
                    event.type,
                    stored,
                    dict(event.metadata),
                    now,
                )
            )

    def load(self, stream: str) -> SagaState | None:
        events = iter(self.store.read_stream(stream))
        first = next(events, None)
        if first is None:
            return None
        name, saga_id = saga_of_stream(stream)
        current = SagaState(name=name, saga_id=saga_id, stream_id=stream)
        current.evolve(first)
        for event in events:
            current.evolve(event)
        return current
