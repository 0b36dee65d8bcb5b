"""Which saga instances still need an orchestrator: kept from the log, not by listing streams.

A store accumulates finished instances forever; an orchestrator polling
several times a second must not read them all each time. The index tails
the global log's `saga` category for the few transitions that change
whether an instance needs work (started, parked, retried, finished), from
where it last stopped, so each poll costs what happened since the last.
"""

from __future__ import annotations

from eventcraft.eventstore import EventStore

from . import state as S

SAGA_CATEGORY = "saga"
"""The category of every saga instance's stream (`saga-<name>:<saga id>`).

Example::

    from eventcraft.eventstore import EventStore
    from eventcraft.sagas import SAGA_CATEGORY, Orchestrator, Saga, Step

    def reserve(data, context): ...

    fulfilment = Saga("fulfilment", [Step("reserve", reserve)])
    store = EventStore.open("sqlite:///shop.db")
    orchestrator = Orchestrator(store, [fulfilment])
    for order in ("order-1", "order-2"):
        orchestrator.start(fulfilment, {"sku": "tea"}, saga_id=order)
    streams = [info.stream_id for info in store.list_streams(category=SAGA_CATEGORY)]
    assert streams == ["saga-fulfilment:order-1", "saga-fulfilment:order-2"]
    store.close()
"""
_TRACKED = [
    S.STARTED,
    S.PARKED,
    S.RETRIED,
    S.COMPENSATION_ORDERED,
    S.COMPLETED,
    S.COMPENSATED,
    S.RESOLVED,
]


class SagaIndex:
    """The instances of a store's sagas running, compensating or parked, kept up to
    date by `refresh` from the transitions appended since the last.

    Example::

        from eventcraft.eventstore import EventStore
        from eventcraft.sagas import Orchestrator, Saga, SagaIndex, Step

        def reserve(data, context): ...

        fulfilment = Saga("fulfilment", [Step("reserve", reserve)])
        store = EventStore.open("sqlite:///shop.db")
        orchestrator = Orchestrator(store, [fulfilment])
        orchestrator.start(fulfilment, {"sku": "tea"}, saga_id="order-1")
        index = SagaIndex(store)
        index.refresh()
        assert index.active == {"saga-fulfilment:order-1"} and index.parked == set()
        orchestrator.run_pending()
        index.refresh()  # reads only what was appended since the last refresh
        assert index.active == set() and index.position == store.high_water_mark()
        store.close()
    """

    def __init__(self, store: EventStore) -> None:
        self.store = store
        self.position = 0
        """The log position read up to."""
        self.active: set[str] = set()
        """Streams of instances running or compensating."""
        self.parked: set[str] = set()

    def refresh(self) -> None:
        """Take in the transitions appended since the last refresh."""
        for event in self.store.read_all(
            after=self.position, categories=SAGA_CATEGORY, types=_TRACKED
        ):
            self.position = event.position
            stream = event.stream_id
            if event.type in (S.STARTED, S.RETRIED, S.COMPENSATION_ORDERED):
                self.parked.discard(stream)
                self.active.add(stream)
            elif event.type == S.PARKED:
                self.active.discard(stream)
                self.parked.add(stream)
            else:
                self.active.discard(stream)
                self.parked.discard(stream)
