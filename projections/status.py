"""How far each projection has got, and how far behind the log it is."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from eventcraft.eventstore import EventStore

from . import checkpoint, clock, parking
from .database import Database
from .definition import Definition
from .selection import read_by_query


@dataclass(frozen=True)
class ProjectionStatus:
    name: str
    position: int
    """The checkpoint: every event up to here is applied."""
    head: int
    """The log's high-water mark when the status was taken."""
    lag_events: int
    """Positions between the checkpoint and the head."""
    lag_seconds: float
    """Age of the oldest event the projection reads and has not applied; 0 when current."""
    generation: int
    """The generation of tables serving queries (grows with each rebuild)."""
    owner: str | None
    """The runner holding the lease, if its lease is current."""
    parked: int
    """Events in the error store."""
    stopped_at: int | None
    """The position of the event it stopped on, if a handler failure stopped it."""
    # Keyword-only, with defaults: a subclass may still add fields without one.
    outage: str | None = field(default=None, kw_only=True)
    """Why the store or the read-model database cannot be reached, while it cannot; the
    other figures are then the last the runner knew."""
    outage_since: float | None = field(default=None, kw_only=True)
    """When the runner first failed to reach it (time.time()), during an outage."""


def collect(
    store: EventStore, database: Database, definitions: Sequence[Definition]
) -> list[ProjectionStatus]:
    names = [d.name for d in definitions]
    head = store.high_water_mark()
    with database.reading() as connection:
        rows = checkpoint.read_many(connection, names)
        parked = parking.summary(connection, names)
        now = clock.read_now(connection)  # the time the leases are kept in
    statuses = []
    for definition in definitions:
        row = rows.get(definition.name)
        if row is None:
            continue
        parked_count, stopped_at = parked.get(definition.name, (0, None))
        statuses.append(
            ProjectionStatus(
                name=definition.name,
                position=row.position,
                head=head,
                lag_events=max(head - row.position, 0),
                lag_seconds=_lag_seconds(store, definition, row.position),
                generation=row.generation,
                owner=row.owner if (row.lease_until or 0) > now else None,
                parked=parked_count,
                stopped_at=stopped_at,
            )
        )
    return statuses


def unknown(name: str, position: int) -> ProjectionStatus:
    """What a runner that never read a projection's status knows of it: its own position."""
    return ProjectionStatus(
        name=name,
        position=position,
        head=position,
        lag_events=0,
        lag_seconds=0.0,
        generation=0,
        owner=None,
        parked=0,
        stopped_at=None,
    )


def never_run(store: EventStore, definitions: Sequence[Definition]) -> list[ProjectionStatus]:
    """Where projections stand that no runner has set up (their database holds no
    checkpoints): at position 0, the whole log behind them, read without a database."""
    head = store.high_water_mark()
    return [
        ProjectionStatus(
            name=definition.name,
            position=0,
            head=head,
            lag_events=head,
            lag_seconds=_lag_seconds(store, definition, 0),
            generation=0,
            owner=None,
            parked=0,
            stopped_at=None,
        )
        for definition in definitions
    ]


def _lag_seconds(store: EventStore, definition: Definition, position: int) -> float:
    if definition.query is not None:
        # The first page of its own: with categories too, the first match may not be one.
        events, _ = read_by_query(store, definition, definition.query, position, 100)
        oldest = events[0] if events else None
    else:
        oldest = next(
            store.read_all(
                after=position, limit=1, categories=definition.categories, types=definition.types
            ),
            None,
        )
    if oldest is None:
        return 0.0
    return max((datetime.now(UTC) - oldest.recorded_at).total_seconds(), 0.0)
