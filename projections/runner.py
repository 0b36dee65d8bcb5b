"""Run projections and subscriptions: catch up, follow live, report, rebuild.

One runner holds several definitions and follows each in a thread of its
own. Several runners (in other processes) may hold the same definition:
a lease in the checkpoint row lets one of them work at a time and passes
to another when its holder stops renewing it, and the checkpoint check in
every batch (`projector.py`) keeps events applied once even if two ever
overlap.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from types import TracebackType

import sqlalchemy as sa
from eventcraft.eventstore import EventStore

from . import checkpoint, generations, parking, schema, settling, status, telemetry
from .database import Database
from .definition import Definition
from .errors import (
    DefinitionError,
    ProjectionStopped,
    ProjectionTimeout,
    UnknownProjection,
)
from .log_start import event_at
from .outage import (
    FIRST_BACKOFF,
    Outage,
    OutageWatch,
    cause_of,
    is_outage,
    jittered,
    next_backoff,
)
from .parking import ParkedEvent
from .projector import Projector
from .read_model import ReadModel
from .rebuild import RebuildReport, rebuild
from .status import ProjectionStatus
from .subscription import Subscription

log = logging.getLogger("eventcraft.projections")

_IDLE = 0.5
"""Longest a follower waits for new events before renewing its lease and looking again."""
_AFTER_ERROR = 1.0
_POLL_CEILING = 0.05


class ProjectionRunner:
    """Keeps `definitions` up to date from `store`'s log.

    `database` is where the read models and checkpoints live: a SQLAlchemy
    URL or Engine, by default the store's own database. `lease_ttl=None`
    runs without leases (every runner works; the checkpoint check still
    applies each event once).

    Example::

        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections import ProjectionRunner, Subscription

        mailed = []
        receipts = Subscription("receipts", mailed.append, types=["OrderPaid"])
        store = EventStore.open("sqlite:///shop.db")
        with ProjectionRunner(store, [receipts]) as runner:
            runner.start()  # follow live, in threads
            written = store.append("order-1", [NewEvent("OrderPaid", {"cents": 1200})])
            runner.wait_until(written.positions[-1])  # read your own writes
            assert [event.stream_id for event in mailed] == ["order-1"]
        store.close()
    """

    def __init__(
        self,
        store: EventStore,
        definitions: Iterable[Definition],
        *,
        database: Database | sa.Engine | str | None = None,
        batch_size: int = 500,
        lease_ttl: float | None = 10.0,
    ) -> None:
        self.store = store
        self.definitions = tuple(definitions)
        for definition in self.definitions:
            if not isinstance(definition, Definition):
                raise DefinitionError(
                    f"a runner runs Projection, Fold and Subscription definitions, "
                    f"not {definition!r}"
                )
        names = [d.name for d in self.definitions]
        if len(set(names)) != len(names):
            raise DefinitionError(f"projection names must be unique, got {names}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise DefinitionError(f"batch_size must be an int >= 1, not {batch_size!r}")
        if lease_ttl is not None and (not isinstance(lease_ttl, int | float) or lease_ttl <= 0):
            raise DefinitionError(f"lease_ttl must be seconds > 0 or None, not {lease_ttl!r}")
        self.database = Database.of(database, store)
        self._owns_database = not isinstance(database, Database | sa.Engine)
        self.owner = f"{os.uname().nodename}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._stopping = threading.Event()
        self._progress = threading.Condition()
        self._threads: dict[str, threading.Thread] = {}
        self.stopped: dict[str, ProjectionStopped] = {}
        """Projections that a handler failure under the "stop" policy stopped, in their
        thread or in `catch_up`, until they are started or caught up again."""
        self._projectors: dict[str, Projector] = {}
        self._outage = OutageWatch(log)
        self._last_status: dict[str, ProjectionStatus] = {}
        try:
            with self.database.transaction() as connection:
                schema.create(connection)
            for definition in self.definitions:
                projector = Projector(
                    store,
                    self.database,
                    definition,
                    owner=self.owner,
                    batch_size=batch_size,
                    lease_ttl=lease_ttl,
                    stopping=self._stopping,
                )
                projector.on_commit = self._notify
                projector.setup()
                self._projectors[definition.name] = projector
            telemetry.watch(self)
        except BaseException:
            # No runner to close for the caller: close the database we opened.
            if self._owns_database:
                self.database.close()
            raise

    # --- running ---------------------------------------------------------------

    def catch_up(self, *names: str) -> None:
        """Apply everything up to the log's head now, in this thread, then return.

        A projection whose lease another runner holds is left to that runner.
        Raises `ProjectionStopped` if a handler failure stops one; `wait_until`
        then raises it too, as for a projection stopped while following.
        """
        for projector in self._selected(names):
            if not projector.acquire():
                continue
            self.stopped.pop(projector.name, None)
            try:
                # Asked again after each batch: a batch the fence refused (the lease taken
                # meanwhile) says so, and its holder works on while this one stops.
                while projector.step() and projector.acquire():
                    pass
            except ProjectionStopped as stopped:
                self.stopped[projector.name] = stopped
                self._notify()
                raise
            finally:
                projector.release()

    def start(self) -> ProjectionRunner:
        """Follow the log in background threads, one per definition not yet running."""
        self._stopping.clear()
        for name, projector in self._projectors.items():
            thread = self._threads.get(name)
            if thread is not None and thread.is_alive():
                continue
            self.stopped.pop(name, None)
            thread = threading.Thread(
                target=self._follow, args=(projector,), name=f"projection:{name}", daemon=True
            )
            self._threads[name] = thread
            thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop following; each thread finishes its batch and gives up its lease."""
        self._stopping.set()
        deadline = time.monotonic() + timeout
        for thread in self._threads.values():
            thread.join(max(deadline - time.monotonic(), 0))

    def run(self) -> None:
        """Follow the log in this thread's stead until `stop()` or Ctrl-C."""
        self.start()
        try:
            while not self._stopping.wait(_IDLE):
                pass
        except KeyboardInterrupt:
            pass
        finally:
            self.stop()

    def close(self) -> None:
        telemetry.unwatch(self)
        self.stop()
        if self._owns_database:
            self.database.close()

    def __enter__(self) -> ProjectionRunner:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _follow(self, projector: Projector) -> None:
        backoff = FIRST_BACKOFF
        while not self._stopping.is_set():
            try:
                if not projector.acquire():
                    self._outage.passed()
                    self._stopping.wait(_IDLE)
                    continue
                if projector.step():
                    self._outage.passed()
                    backoff = FIRST_BACKOFF
                    continue
                self._outage.passed()
                backoff = FIRST_BACKOFF
                self.store.wait_for_events(after=projector.position, timeout=_IDLE)
            except ProjectionStopped as stopped:
                telemetry.stopped(stopped)
                self.stopped[projector.name] = stopped
                self._notify()
                break
            except Exception as error:
                if is_outage(error):
                    # Said once for the runner (`OutageWatch`), not a traceback per try.
                    wait = jittered(backoff)
                    self._outage.failed(projector.name, error, wait)
                    self._stopping.wait(wait)
                    backoff = next_backoff(backoff)
                    continue
                log.error(
                    "projection %r failed; trying again: %s",
                    projector.name,
                    telemetry.traced(error),
                    extra={"projection": projector.name, "position": projector.position},
                )
                self._stopping.wait(_AFTER_ERROR)
        try:
            projector.release()
        except Exception:
            log.exception("projection %r could not release its lease", projector.name)

    def _notify(self) -> None:
        with self._progress:
            self._progress.notify_all()

    # --- reading your writes, status -------------------------------------------

    def wait_until(
        self, position: int, timeout: float = 10.0, names: Sequence[str] | None = None
    ) -> None:
        """Block until every projection (or those `names`d) has applied up to `position`.

        Projections run by other processes count too: their checkpoints are in
        the database. Raises `ProjectionStopped` as soon as one that is behind
        has stopped in this runner on a failing event (it would never get
        there), and `ProjectionTimeout` naming the laggards.
        """
        wanted = [p.name for p in self._selected(tuple(names or ()))]
        deadline = time.monotonic() + timeout
        pause = 0.001
        while True:
            with self.database.reading() as connection:
                rows = checkpoint.read_many(connection, wanted)
            behind = {n: rows[n].position for n in wanted if rows[n].position < position}
            if not behind:
                return
            for name in sorted(behind):
                stopped = self.stopped.get(name)
                if stopped is not None:
                    # A new exception each time: one raised twice would pile up tracebacks.
                    raise ProjectionStopped(
                        stopped.name, stopped.position, stopped.error
                    ) from stopped.error
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ProjectionTimeout(position, behind, timeout)
            # Our own threads wake us at once; other processes' are polled.
            with self._progress:
                self._progress.wait(min(pause, remaining))
            pause = min(pause * 2, _POLL_CEILING)

    def fenced(self) -> dict[str, int]:
        """Per projection, the batches this runner read but another process applied first.

        Without leases, runners that share a projection race for each batch
        and this counts the races lost; with leases it stays near zero.
        """
        return {name: projector.fenced for name, projector in self._projectors.items()}

    def status(self) -> list[ProjectionStatus]:
        """Where each projection stands. While the store or the read-model database
        cannot be reached, each status says so (`outage`, `outage_since`) and holds
        the last figures this runner knew."""
        try:
            found = status.collect(self.store, self.database, self.definitions)
        except Exception as error:
            if not is_outage(error):
                raise
            return self._status_in_outage(error)
        self._last_status = {s.name: s for s in found}
        return found

    def _status_in_outage(self, error: Exception) -> list[ProjectionStatus]:
        outage = self._outage.current or Outage(cause_of(error), time.time())
        statuses = []
        for name, projector in self._projectors.items():
            last = self._last_status.get(name) or status.unknown(name, projector.position)
            statuses.append(replace(last, outage=outage.cause, outage_since=outage.since))
        return statuses

    # --- rebuilding --------------------------------------------------------------

    def rebuild(
        self, name: str, *, progress: bool | Callable[[int, int], None] = False
    ) -> RebuildReport:
        """Replay `name` from the start into new tables and swap them in (blue/green).

        `progress` draws a bar on the terminal, or is called with the position
        reached and the position the replay goes to."""
        projector = self._projectors.get(name)
        if projector is None:
            raise UnknownProjection(self._unknown(name))
        report = rebuild(self.store, self.database, projector.definition, progress=progress)
        self._notify()
        return report

    # --- the error store -----------------------------------------------------------

    def parked(self, name: str, *, after: int = 0, limit: int | None = None) -> list[ParkedEvent]:
        """The events `name` parked after position `after`, in position order, at most
        `limit`."""
        self._projector(name)
        with self.database.reading() as connection:
            return parking.listed(connection, name, after=after, limit=limit)

    def retry_parked(self, name: str, position: int) -> None:
        """Apply the parked event now (it raises if the handler still fails), then forget it.

        A position where nothing is parked raises `ParkedEventNotFound` and
        applies nothing; of two retries of one event, one applies it and the
        other finds it gone, or in hand (a subscriber's, `settling.py`). An
        event that stopped its projection moves the checkpoint past it:
        `start()` resumes the projection. An event retention removed is read
        from its archive; `ArchiveBroken` if the archive cannot be read.
        """
        projector = self._projector(name)
        definition = projector.definition
        # At or below the low-water mark from the archive, which holds what retention
        # removed (a missing archive raises); None only for a position no event has.
        event = event_at(self.store, position)
        if isinstance(definition, Subscription):
            ttl = projector.lease_ttl
            settling.redeliver(
                self.database, definition, position, event, owner=self.owner, ttl=ttl
            )
            self._passed(name, position)
            return

        def apply(connection: sa.Connection, row: checkpoint.Checkpoint) -> None:
            if event is not None:
                tables = generations.tables_of(definition, row.generation)
                definition.apply(ReadModel(connection, tables), [event])

        self._settle(name, position, apply)

    def discard_parked(self, name: str, position: int) -> None:
        """Forget the parked event without applying it; a stopped projection moves past it."""
        self._settle(name, position, lambda connection, row: None)

    def _settle(
        self,
        name: str,
        position: int,
        apply: Callable[[sa.Connection, checkpoint.Checkpoint], None],
    ) -> None:
        """Forget the event parked at `position` after `apply` in the same transaction; a
        projection stopped at it moves past it."""
        self._projector(name)  # a projection of this runner's, or an error before any write
        with self.database.transaction() as connection:
            row, _ = settling.locked(connection, name, position)
            apply(connection, row)
            parking.remove(connection, name, position)
            if position > row.position:
                checkpoint.advance(connection, name, position)
        self._passed(name, position)

    def _passed(self, name: str, position: int) -> None:
        """After a parked event was settled: the projector and waiting readers know that
        the projection is at least at `position`."""
        projector = self._projector(name)
        projector.position = max(projector.position, position)
        self._notify()

    # --- names -------------------------------------------------------------------

    def _selected(self, names: Sequence[str]) -> list[Projector]:
        return [self._projector(n) for n in names] if names else list(self._projectors.values())

    def _projector(self, name: str) -> Projector:
        projector = self._projectors.get(name)
        if projector is None:
            raise UnknownProjection(self._unknown(name))
        return projector

    def _unknown(self, name: str) -> str:
        return f"no projection {name!r} in this runner (it runs {sorted(self._projectors)})"
