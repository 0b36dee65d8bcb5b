"""Competing consumers: processes that share the partitions of one subscription.

Each process runs a `PartitionedRunner` over the same N partition workers
(`PartitionSubscription`s, or relays made per partition). A worker is
worked only by the process holding its lease (the checkpoint row's lease),
so each partition, and with it each stream, is handled in log order by one
process at a time. The processes announce themselves in a membership table
with a lease of their own; each takes at most its fair share, ceil(N /
live members), and gives back what exceeds it, so a newcomer gets work and
a dead member's partitions are taken over once its leases lapse.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Protocol, runtime_checkable

import sqlalchemy as sa
from eventcraft.eventstore import EventStore

from . import checkpoint, clock, schema, telemetry
from .database import Database
from .errors import DefinitionError, ProjectionStopped
from .partitions import Partition, PartitionProjection, PartitionSubscription
from .projection import Projection
from .projector import Projector
from .subscription import Subscription

log = logging.getLogger("eventcraft.projections")

_IDLE = 0.5
_AFTER_ERROR = 1.0

metadata = sa.MetaData()
members = sa.Table(
    "eventcraft_partition_members",
    metadata,
    sa.Column("group_name", sa.Text, primary_key=True),
    sa.Column("owner", sa.Text, primary_key=True),
    # Seconds since the epoch, by the member's clock.
    sa.Column("lease_until", sa.Float, nullable=False),
)


class PartitionWorker(Protocol):
    """One partition's worker: the runner leases it, steps it and lets it go.

    Example::

        from eventcraft.eventstore import EventStore
        from eventcraft.projections import PartitionedRunner, PartitionWorker

        class Sweeper:  # one partition of a job of your own; leases kept elsewhere
            def __init__(self, name: str) -> None:
                self.name, self.position, self.batches = name, 0, 0

            def acquire(self) -> bool:
                return True

            def step(self) -> bool:
                self.batches += 1
                return False  # nothing more to do now

            def release(self) -> None:
                pass

        workers: list[PartitionWorker] = [Sweeper(f"sweep.p{i}of2") for i in range(2)]
        with EventStore.open("memory://") as store:
            with PartitionedRunner(store, "sweep", workers) as runner:
                runner.step()
                assert runner.held == {"sweep.p0of2", "sweep.p1of2"}
        assert [worker.batches for worker in workers] == [1, 1]
    """

    name: str
    position: int

    def acquire(self) -> bool:
        """Take or renew the partition's lease; True if this process holds it."""

    def step(self) -> bool:
        """Handle the next batch; False when there was nothing to do."""

    def release(self) -> None: ...


@runtime_checkable
class _Renewing(Protocol):
    on_renew: Callable[[], None]
    """Called whenever the worker renews its lease in the middle of a batch."""


class PartitionedRunner:
    """Works this process's fair share of `workers`, one batch at a time, in a thread.

    Every process of the group passes workers of the same names; a relay is
    split with `Relay.partitioned`. `owner` is the name this process goes by in
    the group's membership and the partitions' leases, unique to it (by
    default `host:pid:random`); `stop()` reaches the projectors among
    `workers`, so that one waiting to try a failed event again stops at once.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections import PartitionedRunner, Subscription

        shipped = []
        labels = Subscription("labels", lambda event: shipped.append(event.stream_id))
        store = EventStore.open("sqlite:///shop.db")
        for n in range(6):
            store.append(f"order-{n}", [NewEvent("OrderShipped", {})])
        one = PartitionedRunner.for_subscription(store, labels, partitions=4)
        two = PartitionedRunner.for_subscription(store, labels, partitions=4)  # another process's
        for _ in range(3):  # in a service: runner.start() in each process
            one.step()
            two.step()
        assert len(one.held) == len(two.held) == 2  # a fair share each
        assert sorted(shipped) == [f"order-{n}" for n in range(6)]  # each stream once
        one.close()
        two.close()
        store.close()
    """

    def __init__(
        self,
        store: EventStore,
        group: str,
        workers: Sequence[PartitionWorker],
        *,
        database: Database | sa.Engine | str | None = None,
        lease_ttl: float = 10.0,
        owner: str | None = None,
    ) -> None:
        if not workers:
            raise DefinitionError(f"partition group {group!r} needs at least one worker")
        if not isinstance(lease_ttl, int | float) or lease_ttl <= 0:
            raise DefinitionError(f"lease_ttl must be seconds > 0, not {lease_ttl!r}")
        self.store = store
        self.group = group
        self.workers = list(workers)
        self.lease_ttl = float(lease_ttl)
        self.owner = owner or _owner()
        self.database = Database.of(database, store)
        self._owns_database = not isinstance(database, Database | sa.Engine)
        self.held: set[str] = set()
        """Names of the workers this process holds."""
        self.stopped: dict[str, ProjectionStopped] = {}
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._member_until = 0.0
        for worker in self.workers:
            if isinstance(worker, _Renewing):  # projectors and relays
                # A batch that renews its lease half-way renews the membership
                # with it, or the others would count this process gone meanwhile.
                worker.on_renew = self._keep_membership
            if isinstance(worker, Projector):
                # A failing event's back-off ends with a stop, not minutes later.
                worker.stopping = self._stopping
        with self.database.transaction() as connection:
            schema.create(connection, metadata)
        # Joining at once lets members started together count each other from their
        # first round, rather than the first grabbing every partition and giving back.
        self._heartbeat()

    @classmethod
    def for_subscription(
        cls,
        store: EventStore,
        subscription: Subscription,
        *,
        partitions: int,
        database: Database | sa.Engine | str | None = None,
        batch_size: int = 100,
        lease_ttl: float = 10.0,
    ) -> PartitionedRunner:
        """A runner of `subscription` split into `partitions`, each with its checkpoint
        and lease (named `{name}.p{i}of{N}`)."""
        db = Database.of(database, store)
        owner = _owner()
        workers = []
        try:
            with db.transaction() as connection:
                schema.create(connection)
            for partition in Partition.all(partitions):
                projector = Projector(
                    store,
                    db,
                    PartitionSubscription(subscription, partition),
                    owner=owner,
                    batch_size=batch_size,
                    lease_ttl=lease_ttl,
                )
                projector.setup()
                workers.append(projector)
            runner = cls(
                store, subscription.name, workers, database=db, lease_ttl=lease_ttl, owner=owner
            )
        except BaseException:
            if not isinstance(database, Database | sa.Engine):
                db.close()
            raise
        runner._owns_database = not isinstance(database, Database | sa.Engine)
        return runner

    @classmethod
    def for_projection(
        cls,
        store: EventStore,
        projection: Projection,
        *,
        partitions: int,
        database: Database | sa.Engine | str | None = None,
        batch_size: int = 100,
        lease_ttl: float = 10.0,
    ) -> PartitionedRunner:
        """A runner of `projection` split into `partitions` (`PartitionProjection`).

        The projection's tables are created once, under its own name's row,
        which keeps their generation; the partitions' rows keep the
        checkpoints. Each event is still applied exactly once: each partition's
        batch commits with its checkpoint, fenced by its lease.
        """
        if not isinstance(projection, Projection):
            raise DefinitionError(
                f"only a Projection is split in partitions here, not {projection!r}"
            )
        db = Database.of(database, store)
        owner = _owner()
        try:
            with db.transaction() as connection:
                schema.create(connection)
            Projector(store, db, projection, owner=owner, batch_size=1, lease_ttl=None).setup()
            shares = [PartitionProjection(projection, p) for p in Partition.all(partitions)]
            with db.transaction() as connection:
                base = checkpoint.read(connection, projection.name, lock=True)
                assert base is not None, "setup() created it"
                for share in shares:
                    # A row made here, not by the projector's setup, which would make
                    # (and so empty) the shared tables again.
                    if checkpoint.read(connection, share.name) is None:
                        checkpoint.insert(connection, share.name, base.generation)
            workers = []
            for share in shares:
                projector = Projector(
                    store, db, share, owner=owner, batch_size=batch_size, lease_ttl=lease_ttl
                )
                projector.setup()
                workers.append(projector)
            runner = cls(
                store, projection.name, workers, database=db, lease_ttl=lease_ttl, owner=owner
            )
        except BaseException:
            if not isinstance(database, Database | sa.Engine):
                db.close()
            raise
        runner._owns_database = not isinstance(database, Database | sa.Engine)
        return runner

    # --- one round -------------------------------------------------------------

    def step(self) -> bool:
        """Renew membership, settle the share, step each worker held; True if any worked.

        Once `stop()` was called, no further worker is stepped."""
        share = self._heartbeat()
        worked = False
        for worker in self._in_turn():
            if self._stopping.is_set():
                break  # stopped: no further batch, the leases are given back
            if worker.name in self.stopped:
                continue
            if worker.name not in self.held:
                if len(self.held) >= share or not worker.acquire():
                    continue
                self.held.add(worker.name)
                log.info("%s took partition %s", self.owner, worker.name)
            elif len(self.held) > share:
                worker.release()
                self.held.discard(worker.name)
                continue
            elif not worker.acquire():
                self.held.discard(worker.name)  # lost to another while we were away
                continue
            try:
                worked = worker.step() or worked
            except ProjectionStopped as stopped:
                telemetry.stopped(stopped)
                self.stopped[worker.name] = stopped
                worker.release()
                self.held.discard(worker.name)
        return worked

    def _in_turn(self) -> list[PartitionWorker]:
        # Each member starts its round at a different partition, so members that
        # start together do not all reach for the same first ones.
        start = zlib.crc32(self.owner.encode()) % len(self.workers)
        return self.workers[start:] + self.workers[:start]

    def _keep_membership(self) -> None:
        self._heartbeat()

    def _heartbeat(self) -> int:
        # Membership is timed by the database's clock, as leases are (clock.py).
        with self.database.transaction() as connection:
            now = clock.now(connection)
            if self._member_until - time.monotonic() < self.lease_ttl / 2:
                self._member_until = clock.local_deadline(self.lease_ttl)
                until = now + self.lease_ttl
                key = (members.c.group_name == self.group) & (members.c.owner == self.owner)
                updated = connection.execute(
                    sa.update(members).where(key).values(lease_until=until)
                )
                if updated.rowcount == 0:
                    connection.execute(
                        sa.insert(members).values(
                            group_name=self.group, owner=self.owner, lease_until=until
                        )
                    )
                connection.execute(
                    sa.delete(members).where(
                        members.c.group_name == self.group, members.c.lease_until < now
                    )
                )
            live = connection.execute(
                sa.select(sa.func.count()).where(
                    members.c.group_name == self.group, members.c.lease_until >= now
                )
            ).scalar_one()
        return math.ceil(len(self.workers) / max(int(live), 1))

    # --- following -------------------------------------------------------------

    def start(self) -> PartitionedRunner:
        if self._thread is not None and self._thread.is_alive():
            return self
        self._stopping.clear()
        self._thread = threading.Thread(
            target=self._follow, name=f"partitions:{self.group}", daemon=True
        )
        self._thread.start()
        return self

    def run(self) -> None:
        """Work in this thread until `stop()` (from another) or Ctrl-C."""
        self._stopping.clear()
        try:
            self._follow()
        except KeyboardInterrupt:
            return

    def stop(self, timeout: float = 10.0) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _follow(self) -> None:
        while not self._stopping.is_set():
            try:
                if self.step() or self._stopping.is_set():
                    continue
                held = [w for w in self.workers if w.name in self.held]
                if held:
                    after = min(w.position for w in held)
                    self.store.wait_for_events(after=after, timeout=_IDLE)
                else:
                    self._stopping.wait(_IDLE)
            except Exception as error:
                log.error(
                    "partition group %r failed; trying again: %s",
                    self.group,
                    telemetry.traced(error, "the exception its step() raises"),
                )
                self._stopping.wait(_AFTER_ERROR)
        self._leave()

    def _leave(self) -> None:
        for worker in self.workers:
            if worker.name in self.held:
                try:
                    worker.release()
                except Exception:
                    log.exception("could not release partition %s", worker.name)
        self.held.clear()
        try:
            with self.database.transaction() as connection:
                connection.execute(
                    sa.delete(members).where(
                        members.c.group_name == self.group, members.c.owner == self.owner
                    )
                )
        except Exception:
            log.exception("could not leave partition group %r", self.group)

    def close(self) -> None:
        self.stop()
        if self._thread is None:
            self._leave()
        if self._owns_database:
            self.database.close()

    def __enter__(self) -> PartitionedRunner:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _owner() -> str:
    return f"{os.uname().nodename}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
