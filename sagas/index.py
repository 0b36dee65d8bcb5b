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
"""The category of every saga instance's stream (`saga-<name>:<saga id>`)."""
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
    date by `refresh` from the transitions appended since the last."""

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
