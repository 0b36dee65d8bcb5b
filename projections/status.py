"""How far each projection has got, and how far behind the log it is.

A projection's lag is what it would apply: the events after its checkpoint,
up to the head, that its selection takes (its categories, types or query).
On a log of events it does not read it is 0, however far the head has moved.
The store counts them in its indexes (`EventStore.count_events`), which
costs a walk of the entries counted: a lag is counted up to `LAG_COUNTED`
and says "at least" beyond (`lag_capped`). A definition that takes every
event lags by the positions behind the head, exactly, at no cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from eventcraft.eventstore import EventStore, Query, RecordedEvent

from . import checkpoint, clock, parking
from .database import Database
from .definition import Definition
from .selection import narrowed

LAG_COUNTED = 10_000
"""The most events a lag counts: beyond, it is this many and `lag_capped` (a count walks
one index entry an event, a few milliseconds for ten thousand).

Example::

    from eventcraft.eventstore import EventStore, NewEvent
    from eventcraft.projections import LAG_COUNTED, ProjectionStatus, Subscription, never_run

    def behind(status: ProjectionStatus) -> str:  # a lag as a dashboard shows it
        return f"over {LAG_COUNTED:,}" if status.lag_capped else f"{status.lag_events:,}"

    store = EventStore.open("sqlite:///shop.db")
    store.append("order-1", [NewEvent("OrderPaid", {"cents": n}) for n in (900, 1200, 50)])
    (status,) = never_run(store, [Subscription("receipts", print)])
    assert behind(status) == "3" and LAG_COUNTED == 10_000
    store.close()
"""


@dataclass(frozen=True)
class ProjectionStatus:
    """Where a projection stands: its checkpoint, its lag, who runs it, what it parked.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections import ProjectionRunner, ProjectionStatus, Subscription

        store = EventStore.open("sqlite:///shop.db")
        store.append("order-1", [NewEvent("OrderPaid", {}), NewEvent("OrderShipped", {})])
        with ProjectionRunner(store, [Subscription("receipts", lambda event: None)]) as runner:
            runner.catch_up()
            store.append("order-2", [NewEvent("OrderPaid", {})])
            (status,) = runner.status()
            assert isinstance(status, ProjectionStatus)
            assert (status.name, status.position, status.head) == ("receipts", 2, 3)
            assert status.lag_events == 1 and status.lag_seconds >= 0
            assert (status.generation, status.parked, status.stopped_at) == (1, 0, None)
        store.close()
    """

    name: str
    position: int
    """The checkpoint: every event up to here is applied."""
    head: int
    """The log's high-water mark when the status was taken."""
    lag_events: int
    """Events after the checkpoint, up to the head, that the projection reads and would
    apply: at most `LAG_COUNTED` (then `lag_capped`)."""
    lag_seconds: float
    """Age of the oldest of those events; 0 when none waits."""
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
    lag_capped: bool = field(default=False, kw_only=True)
    """More events wait than `lag_events`: the count stopped at `LAG_COUNTED`."""


@dataclass(frozen=True)
class Lag:
    """What a definition has still to apply from a checkpoint to a head.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections import Lag, Subscription, lag_of

        receipts = Subscription("receipts", print, types=["OrderPaid"])
        store = EventStore.open("sqlite:///shop.db")
        store.append("order-1", [NewEvent("OrderPlaced", {}), NewEvent("OrderPaid", {})])
        lag = lag_of(store, receipts, position=0, head=store.high_water_mark())
        assert isinstance(lag, Lag)
        assert (lag.events, lag.capped) == (1, False) and lag.seconds >= 0  # only OrderPaid counts
        assert lag_of(store, receipts, 2, 2) == Lag(events=0, capped=False, seconds=0.0)
        store.close()
    """

    events: int
    """The events it reads in between, at most `LAG_COUNTED`."""
    capped: bool
    """More wait than `events`: the count stopped."""
    seconds: float
    """Age of the oldest of them; 0 when none waits."""


def lag_of(store: EventStore, definition: Definition, position: int, head: int) -> Lag:
    """What `definition` (a projection's, or a relay's selection) has to apply after
    `position` up to `head`: the events its categories, types and query take.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections import Subscription, lag_of

        receipts = Subscription("receipts", print, categories=["order"], types=["OrderPaid"])
        store = EventStore.open("sqlite:///shop.db")
        store.append("order-1", [NewEvent("OrderPaid", {"cents": 900})])
        store.append("cart-7", [NewEvent("ItemAdded", {"sku": "tea"})])  # not read by receipts
        store.append("order-2", [NewEvent("OrderPaid", {"cents": 400})])
        checkpoint = 1  # where a relay or a projection of your own got to
        behind = lag_of(store, receipts, checkpoint, store.high_water_mark())
        assert behind.events == 1 and not behind.capped
        store.close()
    """
    if head <= position:
        return Lag(0, False, 0.0)
    if definition.query is not None:
        return _queried(store, definition, definition.query, position, head)
    if definition.categories is None and definition.types is None:
        oldest = next(store.read_all(after=position, limit=1), None)
        return Lag(head - position, False, _age(oldest, head))
    counted = store.count_events(
        position,
        head,
        categories=definition.categories,
        types=definition.types,
        limit=LAG_COUNTED + 1,
    )
    if counted == 0:
        return Lag(0, False, 0.0)
    oldest = next(
        store.read_all(
            after=position, limit=1, categories=definition.categories, types=definition.types
        ),
        None,
    )
    return Lag(min(counted, LAG_COUNTED), counted > LAG_COUNTED, _age(oldest, head))


def _queried(
    store: EventStore, definition: Definition, query: Query, position: int, head: int
) -> Lag:
    """A query's lag: its matches read (at most `LAG_COUNTED` and one), those of the
    definition's categories counted; a query has no index to count in alone."""
    selected = narrowed(query, definition.types)
    if selected is None:
        return Lag(0, False, 0.0)
    found = store.read_query(selected, after=position, limit=LAG_COUNTED + 1).events
    capped = len(found) > LAG_COUNTED
    categories = definition.categories
    taken = [
        event
        for event in found[:LAG_COUNTED]
        if event.position <= head and (categories is None or event.category in categories)
    ]
    return Lag(len(taken), capped, _age(taken[0] if taken else None, head))


def _age(oldest: RecordedEvent | None, head: int) -> float:
    if oldest is None or oldest.position > head:
        return 0.0
    return max((datetime.now(UTC) - oldest.recorded_at).total_seconds(), 0.0)


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
        behind = lag_of(store, definition, row.position, head)
        statuses.append(
            ProjectionStatus(
                name=definition.name,
                position=row.position,
                head=head,
                lag_events=behind.events,
                lag_seconds=behind.seconds,
                lag_capped=behind.capped,
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
    checkpoints): at position 0, all they read behind them, read without a database.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections import Subscription, never_run

        receipts = Subscription("receipts", lambda event: None, types=["OrderPaid"])
        store = EventStore.open("sqlite:///shop.db")
        store.append("order-1", [NewEvent("OrderPlaced", {}), NewEvent("OrderPaid", {})])
        (status,) = never_run(store, [receipts])  # before any runner: no database needed
        assert (status.position, status.head, status.lag_events) == (0, 2, 1)
        store.close()
    """
    head = store.high_water_mark()
    statuses = []
    for definition in definitions:
        behind = lag_of(store, definition, 0, head)
        statuses.append(
            ProjectionStatus(
                name=definition.name,
                position=0,
                head=head,
                lag_events=behind.events,
                lag_seconds=behind.seconds,
                generation=0,
                owner=None,
                parked=0,
                stopped_at=None,
                lag_capped=behind.capped,
            )
        )
    return statuses
