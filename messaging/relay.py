"""The relay: the global log published to a broker, at least once, in log order.

A relay is a subscription with a stored checkpoint (a row of the
projections' `CheckpointTable`, with its lease): it reads a batch after its
checkpoint, publishes the events it selects, waits until the broker has
confirmed every one, and only then moves the checkpoint past the batch. A
crash anywhere before that move publishes the batch again on restart, so
every event reaches the broker at least once, in log order, and consumers
de-duplicate by the message id (the event id; JetStream does it itself).

When the broker cannot be reached the relay keeps the batch, backs off
(0.1 s doubling to `max_backoff`) and tries it again; meanwhile `status()`
says it is paused, since when and why. It resumes by itself with nothing
lost. A message the broker refuses outright (too large, say) is parked in
the projections' error store and the relay goes on past it.

Several processes may run the same relay: its lease (`relay_lease.py`) lets
one publish at a time, and is kept through a batch however long the broker
takes to confirm it.

However it is run, a relay records its state for other processes
(`relay_state.py`, read by `eventcraft messaging relays` and the console)
when that state changes, never once per batch: "running" when it starts
following the log (`start()`, `run()`), is first stepped holding its lease
(`step()`, as a `PartitionedRunner` steps it) or is about to publish a
catch-up's first batch; "paused" and "running" again across a broker outage
while it follows; "stopped" before it gives its lease up (`release()`, the
end of `catch_up()`, `close()`). A catch-up with nothing to publish says
"stopped" the first time, so that the relay is listed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import sqlalchemy as sa
from eventcraft.eventstore import EventStore, Query, RecordedEvent
from eventcraft.projections import (
    CheckpointTable,
    Database,
    Partition,
    Subscription,
    checkpoint_leases,
    lag_of,
    read_batch,
)

from . import relay_selection, relay_state, telemetry
from .errors import BrokerUnavailable, MessageRefused, MessagingConfigError
from .messages import outgoing
from .publisher import Publisher
from .relay_lease import RelayLease

log = logging.getLogger("eventcraft.messaging")

_IDLE = 0.5
_FIRST_BACKOFF = 0.1
_RETRIED_KEPT = "the exception Relay.catch_up() raises"


@dataclass(frozen=True)
class RelayStatus:
    """Where a relay stands: its checkpoint against the log, and the broker's state.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.messaging import Publisher, Relay, RelayStatus

        class Nowhere(Publisher):  # stands in for a broker's publisher
            broker = "nowhere"

            def publish(self, messages):
                pass

            def close(self):
                pass

        store = EventStore.open("sqlite:///shop.db")
        store.append("order-7", [NewEvent("OrderPlaced", {"cents": 1600})])
        with Relay("orders-out", store, Nowhere()) as relay:
            before: RelayStatus = relay.status()
            relay.catch_up()
            after = relay.status()
        assert (before.position, before.head, before.lag_events) == (0, 1, 1)
        assert (after.position, after.lag_events, after.published) == (1, 0, 1)
        assert after.state == "stopped" and after.paused_since is None  # catch_up ran, returned
    """

    name: str
    broker: str
    position: int
    """The checkpoint: every selected event up to here is confirmed by the broker."""
    head: int
    """The log's high-water mark when the status was taken."""
    lag_events: int
    """Events after the checkpoint, up to the head, that the relay selects (its
    categories, types and query; `where` is not counted): at most `LAG_COUNTED`."""
    state: str
    """"running" (following the log, stepped holding its lease, or catching up), "paused"
    (the broker is unavailable; backing off) or "stopped", as it records it."""
    paused_since: float | None
    """When the current outage began (seconds since the epoch)."""
    last_error: str | None
    """What the broker last answered with, if the relay is paused."""
    published: int
    """Messages confirmed by the broker since this relay object was made."""
    outages: int
    """How many times the broker became unavailable since then."""
    parked: int
    """Events the broker refused, kept in the error store."""
    owner: str | None
    """The process holding the relay's lease, if it is current."""
    lag_capped: bool = False
    """More events wait than `lag_events`, which stopped at `LAG_COUNTED`."""


class Relay:
    """Publishes the events of `store` that it selects through `publisher`.

    The publisher is a `RabbitMQPublisher`, a `JetStreamPublisher` or a `Publisher` of
    your own. `start()` follows the log in a thread, `run()` in this one, and
    `catch_up()` publishes up to the head and returns.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.messaging import Publisher, Relay

        class Kept(Publisher):  # stands in for RabbitMQPublisher or JetStreamPublisher
            broker = "memory"

            def __init__(self):
                self.subjects = []

            def publish(self, messages):
                self.subjects += [m.subject for m in messages]

            def close(self):
                pass

        store = EventStore.open("sqlite:///shop.db")
        store.append("order-7", [NewEvent("OrderPlaced", {"cents": 1600})])
        store.append("cart-3", [NewEvent("ItemAdded", {"sku": "tea"})])
        kept = Kept()
        with Relay("orders-out", store, kept, categories=["order"]) as relay:
            relay.catch_up()  # published, confirmed, then checkpointed
            store.append("order-7", [NewEvent("OrderPaid", {"cents": 1600})])
            relay.catch_up()  # from its checkpoint on
        assert kept.subjects == ["order.OrderPlaced", "order.OrderPaid"] and relay.position == 3

    `categories`, `types`, `query` (an eventstore `Query` of types and tags)
    and `where` (a predicate on the event's data) select the events; the
    checkpoint passes the others too. `partition`
    makes it publish only the streams of one partition of the log, with a
    checkpoint of its own (see `PartitionedRunner`). Several processes may
    run the same relay: the lease lets one publish at a time.
    """

    def __init__(
        self,
        name: str,
        store: EventStore,
        publisher: Publisher,
        *,
        categories: Sequence[str] | str | None = None,
        types: Sequence[str] | str | None = None,
        query: Query | None = None,
        where: Callable[[Mapping[str, Any]], bool] | None = None,
        database: Database | sa.Engine | str | None = None,
        batch_size: int = 500,
        lease_ttl: float | None = 10.0,
        max_backoff: float = 10.0,
        partition: Partition | None = None,
    ) -> None:
        if not isinstance(publisher, Publisher):
            raise MessagingConfigError(f"a relay publishes through a Publisher, not {publisher!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise MessagingConfigError(f"batch_size must be an int >= 1, not {batch_size!r}")
        if not isinstance(max_backoff, int | float) or max_backoff <= 0:
            raise MessagingConfigError(f"max_backoff must be seconds > 0, not {max_backoff!r}")
        full_name = name if partition is None else partition.name_of(name)
        # The subscription checks the name and the selection and reads batches.
        self.selection = Subscription(
            full_name, _unused, categories=categories, types=types, query=query, where=where
        )
        self.name = full_name
        self.store = store
        self.publisher = publisher
        self.partition = partition
        self.batch_size = batch_size
        self.lease_ttl = lease_ttl
        self.max_backoff = float(max_backoff)
        self.owner = f"{os.uname().nodename}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.database = Database.of(database, store)
        self._owns_database = not isinstance(database, Database | sa.Engine)
        self.position = 0
        self.published = 0
        self.outages = 0
        self.paused_since: float | None = None
        self.last_error: str | None = None
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._said: str | None = None
        """The state this relay last recorded (`_say`); None before it first ran."""
        self.on_renew: Callable[[], None] = lambda: None
        """Called, from the thread keeping the lease, when a batch renewed it half-way (a
        partition group would renew its membership with it)."""
        self.lease = RelayLease(
            self.database, full_name, self.owner, lease_ttl, lambda: self.on_renew()
        )
        self._setup()
        telemetry.watch(self)

    def _setup(self) -> None:
        with self.database.transaction() as connection:
            CheckpointTable(connection).create()
            relay_state.create(connection)
        with self.database.transaction() as connection:
            self.position = CheckpointTable(connection).start(self.name).position

    # --- one batch -------------------------------------------------------------

    def step(self) -> bool:
        """Publish the next batch and move the checkpoint; False if at the head or not ours.

        The first step that holds the lease records the relay as running, until
        `release()` or `close()`. Raises `BrokerUnavailable` with the checkpoint unmoved.
        """
        return self._step(stepped=True)

    def _step(self, *, stepped: bool) -> bool:
        if not self.acquire():
            return False
        after = self.position
        events, upto = read_batch(self.store, self.selection, after, self.batch_size)
        # Said when it changes, not per batch: a write costs a batch what its commit does.
        if self._said not in ("running", "paused") and (stepped or upto > after):
            self._say("running")
        elif self._said is None:
            self._say("stopped")  # a catch-up with nothing to publish: listed all the same
        if upto <= after:
            return False
        chosen = self._chosen(events, after, upto)
        refused: MessageRefused | None = None
        try:
            with self.lease.kept(after) if chosen else contextlib.nullcontext():
                self.publisher.publish([outgoing(e) for e in chosen])
        except MessageRefused as error:
            refused = error
        # The broker answered: an outage is over. Recorded before the checkpoint moves, as
        # a pause is before status() says so: whoever sees the position move past an
        # outage finds the relay running.
        self._resumed()
        if refused is not None:
            self._park(chosen, refused)
            return True
        with self.database.transaction() as connection:
            table = CheckpointTable(connection)
            row = table.read(self.name, lock=True)
            if row is None or row.position != after or not self.lease.ours(row):
                # Another process took over and moved on: follow it.
                self.position = after if row is None else row.position
                self.lease.lost()
                return True
            table.advance(self.name, upto, lease_ttl=self.lease.renewing_ttl())
        self.position = upto
        self.published += len(chosen)
        telemetry.published(self, len(chosen))
        return True

    def _chosen(
        self, events: Sequence[RecordedEvent], after: int, upto: int
    ) -> list[RecordedEvent]:
        where, partition = self.selection.where, self.partition
        chosen = [
            e
            for e in events
            if (partition is None or partition.owns(e.stream_id))
            and (where is None or where(e.data))
        ]
        if not chosen:
            return chosen
        with self.database.reading() as connection:
            refused = {p.position for p in CheckpointTable(connection).parked(self.name)}
        return [e for e in chosen if e.position not in refused] if refused else chosen

    def _park(self, chosen: Sequence[RecordedEvent], refused: MessageRefused) -> None:
        event = next(e for e in chosen if str(e.id) == refused.message_id)
        # Not the broker's answer: a publisher's may quote the message's body.
        log.error(
            "relay %r: %s refused the event at %s (%s v%s, %s); parked, going on past it: %s",
            self.name,
            refused.broker,
            event.position,
            event.stream_id,
            event.version,
            event.type,
            telemetry.told(refused, telemetry.PARKED_KEPT),
        )
        with self.database.transaction() as connection:
            CheckpointTable(connection).park(self.name, event, refused, attempts=1)

    def catch_up(self) -> None:
        """Publish everything up to the log's head now, in this thread, then return.

        Recorded as running while it publishes, and stopped once it returns. Raises
        `BrokerUnavailable` if the broker cannot be reached; the lease is given up
        either way.
        """
        try:
            while self._step(stepped=False):
                pass
        finally:
            self.release()

    @classmethod
    def partitioned(
        cls,
        name: str,
        store: EventStore,
        publisher: Callable[[], Publisher],
        *,
        partitions: int,
        **options: Any,
    ) -> list[Relay]:
        """One relay per partition of the log, each with a publisher of its own, for a
        `PartitionedRunner`: the streams spread over processes, each in order."""
        return [
            cls(name, store, publisher(), partition=partition, **options)
            for partition in Partition.all(partitions)
        ]

    # --- following -------------------------------------------------------------

    def start(self) -> Relay:
        """Follow the log in a background thread."""
        if self._thread is not None and self._thread.is_alive():
            return self
        self._stopping.clear()
        self._thread = threading.Thread(target=self._follow, name=f"relay:{self.name}", daemon=True)
        self._thread.start()
        return self

    def run(self) -> None:
        """Follow the log in this thread until `stop()` (from another) or Ctrl-C."""
        self._stopping.clear()
        with contextlib.suppress(KeyboardInterrupt):
            self._follow()

    def stop(self, timeout: float = 10.0) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _follow(self) -> None:
        backoff = _FIRST_BACKOFF
        self._say("running")
        while not self._stopping.is_set():
            try:
                if self.step():
                    backoff = _FIRST_BACKOFF
                    continue
                self._resumed()
                if self.lease.held_until == 0.0 and self.lease_ttl is not None:
                    self._stopping.wait(_IDLE)  # another process holds the lease
                else:
                    self.store.wait_for_events(after=self.position, timeout=_IDLE)
            except BrokerUnavailable as error:
                self._paused(error)
                self._stopping.wait(backoff)
                backoff = min(backoff * 2, self.max_backoff)
            except Exception as error:
                # A `where` or a publisher may quote an event's data in its message: the log
                # and the relay's recorded state (a table no forget reaches) say its type.
                told = telemetry.told(error, _RETRIED_KEPT)
                log.error(
                    "relay %r failed; trying again: %s",
                    self.name,
                    telemetry.traced(error, _RETRIED_KEPT),
                )
                self.last_error = told
                self._stopping.wait(backoff)
                backoff = min(backoff * 2, self.max_backoff)
        self.release()

    def _paused(self, error: BrokerUnavailable) -> None:
        self.last_error = str(error)
        if self.paused_since is None:
            log.warning("relay %r paused: %s", self.name, error)
            self.outages += 1
            telemetry.outage(self)
            # Recorded before status() says so: whoever sees "paused" here finds it there.
            self._say("paused", since=time.time())

    def _resumed(self) -> None:
        if self.paused_since is not None:
            log.warning("relay %r resumed after %.1f s", self.name, time.time() - self.paused_since)
            self.paused_since = None
            self.last_error = None
            self._say("running")

    def _say(self, state: str, since: float | None = None) -> None:
        """Tell other processes (`eventcraft messaging relays`) what this relay is doing,
        and what it selects."""
        self._said = state
        told = relay_state.RelayState(
            name=self.name,
            broker=self.publisher.broker,
            state=state,
            paused_since=since,
            last_error=self.last_error,
            outages=self.outages,
            updated_at=time.time(),
            # Beside its state, so that the command line and the console count its lag
            # as status() does.
            selection=relay_selection.recorded(self.selection),
        )
        try:
            with self.database.transaction() as connection:
                relay_state.write(connection, told)
        except Exception:
            log.exception("relay %r could not record that it is %s", self.name, state)
        if state == "paused":
            self.paused_since = since

    # --- lease -----------------------------------------------------------------

    def acquire(self) -> bool:
        """Take or renew the relay's lease; True if this process holds it."""
        held, position = self.lease.acquire()
        if position is not None:
            self.position = position
        return held

    def release(self) -> None:
        """Give the lease up, having recorded that the relay stopped if it said it ran."""
        if self._said in ("running", "paused"):
            # Before the lease goes: a process taking it over says "running" after this.
            self._say("stopped")
        try:
            self.lease.release()
        except Exception:
            log.exception("relay %r could not release its lease", self.name)

    # --- status ----------------------------------------------------------------

    def status(self) -> RelayStatus:
        head = self.store.high_water_mark()
        position, owner = checkpoint_leases(self.database, [self.name]).get(
            self.name, (self.position, None)
        )
        with self.database.reading() as connection:
            parked = len(CheckpointTable(connection).parked(self.name))
        following = self._thread is not None and self._thread.is_alive()
        running = following or self._said == "running"
        state = "paused" if self.paused_since is not None else "running" if running else "stopped"
        behind = lag_of(self.store, self.selection, position, head)
        return RelayStatus(
            name=self.name,
            broker=self.publisher.broker,
            position=position,
            head=head,
            lag_events=behind.events,
            state=state,
            paused_since=self.paused_since,
            last_error=self.last_error,
            published=self.published,
            outages=self.outages,
            parked=parked,
            owner=owner,
            lag_capped=behind.capped,
        )

    # --- closing ---------------------------------------------------------------

    def close(self) -> None:
        telemetry.unwatch(self)
        self.stop()
        if self._thread is None or not self._thread.is_alive():
            self.release()
        self.publisher.close()
        if self._owns_database:
            self.database.close()

    def __enter__(self) -> Relay:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _unused(event: RecordedEvent) -> None:
    raise AssertionError("a relay publishes batches; it never delivers one event")
