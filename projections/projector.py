"""One definition against the log: batches applied exactly once, failures parked.

A batch is read from the store first, outside any transaction. Then one
transaction of the read-model database locks the projection's checkpoint
row, checks that the checkpoint is still where the batch began (and, with
leases, that we still hold the lease), applies the batch and moves the
checkpoint. If another process moved it meanwhile, nothing is applied and
we carry on from where it got to. So two projectors of one projection can
never both apply an event, lease or no lease; the lease only spares them
the wasted reads.

When a handler raises, the batch is rolled back and replayed one event per
transaction, each tried `attempts` times in all with back-off (the failed
batch counting as the first try of the event it failed on); the one that
keeps failing is parked, then skipped or the projection stops just before it.
A runner stopped during a back-off abandons the batch instead: the event is
neither parked nor passed, and the next run tries it again.

A subscriber's deliveries cannot be fenced as commits are: its handler acts
outside the read-model database, and one call may outlast the lease. So while
a batch is delivered, a thread beside it keeps the lease (`keeping.py`), and a
lease found taken ends the batch as soon as the handler returns.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from functools import partial

import sqlalchemy as sa
from eventcraft.eventstore import EventStore, RecordedEvent

from . import checkpoint, clock, generations, parking, telemetry
from .checkpoint import Checkpoint
from .database import Database
from .definition import Definition, failed_position
from .errors import ProjectionStopped
from .keeping import kept_alive
from .log_start import archived_batch, current_low_water_mark, low_water_mark
from .read_model import ReadModel
from .selection import read_by_query
from .subscription import Subscription

log = logging.getLogger("eventcraft.projections")


class _HandlerFailed(Exception):
    def __init__(self, error: Exception) -> None:
        self.error = error


class _Moved(Exception):
    """Another process moved the checkpoint: it has this batch in hand."""


class _Abandoned(Exception):
    """The runner stopped during a retry's back-off: the rest of the batch is the next run's."""


class Projector:
    def __init__(
        self,
        store: EventStore,
        database: Database,
        definition: Definition,
        *,
        owner: str,
        batch_size: int,
        lease_ttl: float | None,
        stopping: threading.Event | None = None,
    ) -> None:
        self.store = store
        self.tenant: str | None = getattr(store, "tenant", None)
        """The tenant whose store it reads (for telemetry); None for a store of no tenant."""
        self.database = database
        self.definition = definition
        self.name = definition.name
        self.owner = owner
        self.batch_size = batch_size
        self.lease_ttl = lease_ttl
        self.position = 0
        self.fenced = 0
        """Batches read but found applied by another process when about to commit."""
        """The checkpoint as last seen; the truth is the row."""
        self.stopping = stopping or threading.Event()
        """Set when its runner stops: a back-off before the next try ends there."""
        self.on_commit: Callable[[], None] = lambda: None
        self.on_renew: Callable[[], None] = lambda: None
        """Called when a batch renewed the lease half-way (a group renews its membership);
        from the thread keeping the lease while a subscriber's handler runs long."""
        self._held_until = 0.0
        """When the lease lapses, on this process's monotonic clock (`clock.local_deadline`);
        0 when not held."""
        # The thread keeping the lease and the batch between two deliveries would
        # otherwise both renew it, and call `on_renew` at once.
        self._renewing = threading.Lock()
        self._lease_lost = False

    def setup(self) -> None:
        """Create the checkpoint row and the first generation's tables, once."""
        with self.database.reading() as connection:
            # A projection set up before is only read: a read-only role opens it.
            row = checkpoint.read(connection, self.name)
        if row is not None:
            self.position = row.position
            return
        with self.database.transaction() as connection:
            checkpoint.lock_new(connection, self.name)
            row = checkpoint.read(connection, self.name, lock=True)
            if row is None:
                generations.create(connection, self.definition, 1)
                generations.serve(connection, self.definition, 1)
                checkpoint.insert(connection, self.name, 1)
                self.position = 0
            else:
                self.position = row.position

    def acquire(self) -> bool:
        """Take or renew the lease; always True when running without leases."""
        if self.lease_ttl is None:
            return True
        if not self._renewal_due():
            return True  # renewed by a recent batch
        deadline = clock.local_deadline(self.lease_ttl)
        with self.database.transaction() as connection:
            held = checkpoint.acquire_lease(connection, self.name, self.owner, self.lease_ttl)
            row = checkpoint.read(connection, self.name)
        if row is not None:
            self.position = row.position
        self._held_until = deadline if held else 0.0
        return held

    @property
    def holds_lease(self) -> bool:
        """Whether this projector took the lease and it has not lapsed by its clock."""
        return self._held_until > time.monotonic()

    def release(self) -> None:
        self._held_until = 0.0
        if self.lease_ttl is None:
            return
        with self.database.transaction() as connection:
            checkpoint.release_lease(connection, self.name, self.owner)

    def step(self) -> bool:
        """Apply the next batch; False when the projection was already at the head, or
        the runner stopped while a failing event waited for its next try."""
        after = self.position
        events, upto = read_batch(self.store, self.definition, after, self.batch_size)
        if upto <= after:
            return False
        with telemetry.processing(self.name, events, self.tenant):
            try:
                if isinstance(self.definition, Subscription):
                    self._deliver(events, upto, self.definition)
                else:
                    try:
                        self._commit(after, events, upto)
                    except _HandlerFailed as failed:
                        self._one_by_one(events, upto, failed.error)
            except _Moved:
                pass
            except _Abandoned:
                return False
        return True

    def _commit(self, after: int, events: Sequence[RecordedEvent], upto: int) -> None:
        """Apply `events` and move the checkpoint from `after` to `upto`."""
        with self.database.transaction() as connection:
            row = self._fenced(connection, after)
            if events:
                read_model = ReadModel(
                    connection, generations.tables_of(self.definition, row.generation)
                )
                try:
                    self.definition.apply(read_model, events)
                except Exception as error:
                    raise _HandlerFailed(error) from error
            parking.settle(connection, self.name, after, upto)
            checkpoint.advance(connection, self.name, upto, lease_ttl=self._renewing_ttl())
        self.position = upto
        self.on_commit()

    def _one_by_one(
        self, events: Sequence[RecordedEvent], upto: int, batch_error: Exception
    ) -> None:
        """Apply `events` one per transaction, after the batch of them failed with `batch_error`.

        The failed batch was the first try of the event it failed on, if the
        definition told which (`note_failure`); the others have all their tries.
        """
        telemetry.handler_failed(self.name, None, batch_error, self.tenant)
        failed_at = failed_position(batch_error)
        for event in events:
            failed = batch_error if event.position == failed_at else None
            error = self._tried(partial(self._commit_one, event), failed=failed)
            if error is not None:
                self._park(event, error)
        self._commit(self.position, [], upto)

    def _commit_one(self, event: RecordedEvent) -> None:
        self._commit(self.position, [event], event.position)

    def _deliver(
        self, events: Sequence[RecordedEvent], upto: int, subscription: Subscription
    ) -> None:
        delivered = self.position
        # A batch with none of the subscription's events (the log moved on elsewhere)
        # delivers nothing: no keeper to start.
        with self._lease_kept() if events else nullcontext():
            for event in events:
                try:
                    error = self._tried(partial(self._deliver_one, subscription, event, delivered))
                except _Abandoned:
                    self._commit_delivered(delivered)
                    raise
                if error is not None:
                    self._commit_delivered(delivered)
                    self._park(event, error)
                delivered = event.position
        self._commit(self.position, [], upto)

    def _deliver_one(
        self, subscription: Subscription, event: RecordedEvent, delivered: int
    ) -> None:
        """Deliver `event`, renewing the lease first once half of it has passed.

        Renewed here, the lease checkpoints what was delivered so far (up to
        `delivered`), so that a crash redelivers less; a lease another process
        took meanwhile ends the batch (`_Moved`), before the handler or, when
        the keeper found it taken during the handler, right after it.
        """
        if self.lease_ttl is not None:
            with self._renewing:
                if self._renewal_due():
                    self._commit(self.position, [], delivered)
                    self.on_renew()
        subscription.deliver(event)
        if self._lease_lost:
            # The row is not ours to checkpoint: its holder delivers from its own
            # checkpoint on, this event again among them (at least once).
            self.fenced += 1
            raise _Moved

    def _lease_kept(self) -> AbstractContextManager[None]:
        """Keep the lease while the body delivers a batch, whatever a handler takes."""
        self._lease_lost = False
        ttl = self.lease_ttl
        if ttl is None:
            return nullcontext()
        return kept_alive(
            self._renew_beside,
            lambda: self._held_until - ttl / 2 - time.monotonic(),
            ttl / 10,
            f"the lease of {self.name!r}",
        )

    def _renew_beside(self) -> bool:
        """The keeper's renewal: False, ending the keeping, once another process holds
        the lease. It extends the lease only; the checkpoint moves with deliveries."""
        assert self.lease_ttl is not None
        with self._renewing:
            if not self._renewal_due():
                return True  # renewed between two deliveries meanwhile
            until = clock.local_deadline(self.lease_ttl)
            with self.database.transaction() as connection:
                held = checkpoint.renew_lease(connection, self.name, self.owner, self.lease_ttl)
            if not held:
                log.warning(
                    "projection %r: another process took its lease during a delivery", self.name
                )
                self._held_until = 0.0
                self._lease_lost = True
                return False
            self._held_until = until
            self.on_renew()
        return True

    def _renewal_due(self) -> bool:
        """Whether half the lease has passed since it was last taken or renewed."""
        assert self.lease_ttl is not None
        return self._held_until - time.monotonic() < self.lease_ttl / 2

    def _commit_delivered(self, delivered: int) -> None:
        # Checkpointed before the batch goes no further, so that only the
        # event it stopped at is in question.
        if delivered > self.position:
            self._commit(self.position, [], delivered)

    def _tried(
        self, attempt: Callable[[], object], *, failed: Exception | None = None
    ) -> Exception | None:
        """Run `attempt` with the policy's retries; the last error, or None once it worked.

        `failed` is the error of a try made already: it counts as the first.
        """
        policy = self.definition.on_error
        error = failed
        for number in range(1 if failed is None else 2, policy.attempts + 1):
            if number > 1 and self.stopping.wait(policy.pause_before(number)):
                # A stop says nothing of the event: parking it would pass it for good.
                raise _Abandoned
            try:
                attempt()
                return None
            except _HandlerFailed as raised:
                error = raised.error
                telemetry.handler_failed(self.name, None, error, self.tenant)
            except _Moved:
                raise
            except Exception as raised:
                if not isinstance(self.definition, Subscription):
                    raise
                error = raised
                telemetry.handler_failed(self.name, None, error, self.tenant)
        assert error is not None
        return error

    def _park(self, event: RecordedEvent, error: Exception) -> None:
        policy = self.definition.on_error
        skip = policy.then == "skip"
        telemetry.parked(self.name, event, error, stops=not skip, tenant=self.tenant)
        with self.database.transaction() as connection:
            row = self._fenced(connection, self.position)
            parking.park(connection, self.name, event, error, policy.attempts)
            # Under "stop" the checkpoint stays just below the event: a restart
            # tries it again, and nothing after it is applied before it.
            upto = event.position if skip else max(row.position, event.position - 1)
            checkpoint.advance(connection, self.name, upto, lease_ttl=self._renewing_ttl())
        self.position = upto
        self.on_commit()
        if not skip:
            raise ProjectionStopped(self.name, event.position, error)

    def _fenced(self, connection: sa.Connection, after: int) -> Checkpoint:
        """The locked row, if the checkpoint is still `after` and the lease ours."""
        row = checkpoint.read(connection, self.name, lock=True)
        if row is None:
            raise LookupError(f"projection {self.name!r} has no checkpoint row: call setup()")
        ours = self.lease_ttl is None or row.owner == self.owner
        if row.position != after or not ours:
            self.fenced += 1
            self.position = row.position
            if not ours:
                # Taken meanwhile (this process was paused past its lease): ask the row
                # next time.
                self._held_until = 0.0
            raise _Moved
        return row

    def _renewing_ttl(self) -> float | None:
        """The lease's length, for a commit to renew it with; None without leases."""
        if self.lease_ttl is None:
            return None
        self._held_until = clock.local_deadline(self.lease_ttl)
        return self.lease_ttl


def read_batch(
    store: EventStore, definition: Definition, after: int, limit: int
) -> tuple[list[RecordedEvent], int]:
    """The definition's next events after `after`, and the position they take it to.

    A short page means every matching event up to the high-water mark read
    beforehand is in hand, so the checkpoint may pass the events this
    definition does not read.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections import Subscription, read_batch

        receipts = Subscription("receipts", lambda event: None, types=["OrderPaid"])
        store = EventStore.open("sqlite:///shop.db")
        store.append("order-1", [NewEvent("OrderPlaced", {}), NewEvent("OrderPaid", {})])
        store.append("order-2", [NewEvent("OrderPlaced", {})])
        events, upto = read_batch(store, receipts, after=0, limit=100)
        assert [event.position for event in events] == [2]
        assert upto == 3  # a short page: the checkpoint may pass the OrderPlaced at 3
        store.close()
    """
    mark = low_water_mark(store, after)
    if after >= mark:
        events, upto = _from_store(store, definition, after, limit)
        if upto <= after:  # nothing to pass over (an idle poll): no hole to have missed
            return events, upto
        # The mark read before may be stale (cached, or a run committed since): asked
        # again after the read, a mark still at or below `after` means no run had removed
        # an event beyond `after` when the read began, so it saw no hole.
        mark = current_low_water_mark(store)
        if after >= mark:
            return events, upto
    # Below the mark the store has holes retention left: the archive holds them all.
    events, upto = archived_batch(store, definition, after, limit, mark)
    if definition.query is not None:
        events = [event for event in events if definition.query.matches_event(event)]
    return events, upto


def _from_store(
    store: EventStore, definition: Definition, after: int, limit: int
) -> tuple[list[RecordedEvent], int]:
    if definition.query is not None:
        return read_by_query(store, definition, definition.query, after, limit)
    head = store.high_water_mark()
    events = list(
        store.read_all(
            after=after, limit=limit, categories=definition.categories, types=definition.types
        )
    )
    last = events[-1].position if events else after
    return events, last if len(events) == limit else max(head, last)
