"""One runner for many tenants: every tenant's read models kept current by a few threads.

A `ProjectionRunner` follows one store with a thread per definition, each waiting on its
store's log: for a thousand tenants that is a thousand stores kept open and thousands
of threads. A `TenantsRunner` serves every tenant with `workers` threads instead. Each
takes the tenant whose turn it is (`tenant_turns.py`: round-robin among the tenants with
work, so one busy tenant cannot starve the others), applies one batch of each of its
definitions through the tenant's `Projector`s (the very code a `ProjectionRunner` runs:
each event applied once, failures parked, leases), and gives the tenant back.

**Where.** A tenant's checkpoints and read models are in its own place, the database of
its store, as a `ProjectionRunner` on the tenant's store keeps them: dropped with it.

**The bound.** The runner's threads are its `workers` (each with, while it delivers a
subscription's batch, the thread that keeps that batch's lease). A worker uses one
tenant's store and one tenant's read-model database at a time: the stores are the
`Tenants`' own, at most its `most_open` open, and the read-model databases connected are
at most `most_open` (the tenants' by default, `tenant_databases.py`). No tenant holds a
thread or a connection while it waits for events: a tenant with nothing to do is looked
at again after a pause that doubles up to `idle` seconds, each look one read of its
high-water mark, or at once when `nudge`d.

**Which tenants.** Those given (`serve`, or `tenant_ids=`), and those `discover` names
each time it is called (every `discover_every` seconds): by default the tenants the
placement holds (`Tenants.known`: the template's files, schemas or databases), so a
tenant's first append, which makes its place, gets it served within `discover_every`
seconds (at once, if the appending code `nudge`s the runner); or the application's own
list (its sign-ups). A tenant served before its first append is looked at like any idle
one.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Literal

from eventcraft.eventstore import EventStore, StoreUnavailable, Tenants, UnsupportedStoreURL

from . import checkpoint, schema, status, telemetry
from .database import Database
from .definition import Definition
from .errors import DefinitionError, ProjectionStopped, ProjectionTimeout, UnknownProjection
from .outage import FIRST_BACKOFF, is_outage, jittered, next_backoff
from .projector import Projector
from .rebuild import RebuildReport, rebuild
from .status import ProjectionStatus
from .tenant_databases import TenantDatabases
from .tenant_turns import TenantTurns

log = logging.getLogger("eventcraft.projections")

IDLE = 1.0
"""Default for the longest a tenant with nothing to do waits before it is looked at again."""
DISCOVER_EVERY = 5.0
"""Default for the seconds between two calls of `discover`."""
_POLL_CEILING = 0.05

Definitions = Iterable[Definition] | Callable[[str], Iterable[Definition]]
"""The definitions every tenant's read models follow, or a function from a tenant id to
that tenant's (a process manager bound to the tenant's orchestrator, say)."""
Turn = Callable[[str], bool]
"""More work for a tenant's turn, after its batches: True if it has more to do at once."""


@dataclass
class _Served:
    """One tenant as the runner serves it."""

    store: EventStore
    definitions: tuple[Definition, ...] | None = None
    projectors: dict[str, Projector] = field(default_factory=dict)
    backoff: float = FIRST_BACKOFF
    """After a failed turn, how long until the next; doubled while turns fail."""


class TenantsRunner:
    """Keeps `definitions` current in every tenant of `tenants`, with `workers` threads.

    Each tenant's checkpoints and read models are in its own place (the database of its
    store); at most `tenants.most_open` tenant stores are open and at most `most_open`
    read-model databases connected (the tenants' `most_open` by default), however many
    tenants. The tenants served are those of `tenant_ids`, those `serve` adds, and those
    `discover()` returns, called every `discover_every` seconds: by default
    `tenants.known` (each tenant that has a place), None for none. Tenants take turns: a
    turn applies one batch (`batch_size` events at most) of each of the tenant's
    definitions, and a tenant with work left waits behind the others with work. A tenant
    with nothing to do is looked at again within `idle` seconds, or at once when
    `nudge`d. `turn`, if given, is called in each tenant's turn after its batches (the
    sagas' orchestrators run there). `lease_ttl` is each checkpoint's lease, as in
    `ProjectionRunner`: runners in several processes share the tenants.

    Example::

        import sqlalchemy as sa
        from eventcraft.eventstore import NewEvent, Tenants
        from eventcraft.projections import Projection, TenantsRunner

        orders = sa.Table("orders", sa.MetaData(), sa.Column("id", sa.Text, primary_key=True))
        order_list = Projection("order-list", tables=[orders])

        @order_list.on("OrderPlaced")
        def placed(read_model, event):
            read_model.execute(sa.insert(read_model[orders]).values(id=event.stream_id))

        with Tenants("sqlite:///tenant-{tenant}.db", most_open=2) as tenants:
            with TenantsRunner(tenants, [order_list], workers=2) as runner:
                runner.start()  # 2 threads, however many tenants
                for tenant in ["acme", "globex", "initech"]:
                    store = tenants.for_tenant(tenant)
                    written = store.append(f"{tenant}-1", [NewEvent("OrderPlaced", {})])
                    runner.wait_until(tenant, written.positions[-1])  # serves it, if it did not
                assert runner.served() == ["acme", "globex", "initech"]
                assert runner.checkpoints("globex") == {"order-list": 1}
                assert len(tenants.open_tenants()) <= 2
        with sa.create_engine("sqlite:///tenant-globex.db").connect() as connection:
            assert connection.execute(sa.select(orders)).all() == [("globex-1",)]  # its own
    """

    def __init__(
        self,
        tenants: Tenants,
        definitions: Definitions,
        *,
        workers: int = 2,
        tenant_ids: Iterable[str] = (),
        discover: Callable[[], Iterable[str]] | Literal["placement"] | None = "placement",
        discover_every: float = DISCOVER_EVERY,
        idle: float = IDLE,
        batch_size: int = 500,
        lease_ttl: float | None = 10.0,
        most_open: int | None = None,
        turn: Turn | None = None,
    ) -> None:
        if not isinstance(tenants, Tenants):
            raise DefinitionError(
                f"a TenantsRunner serves the stores of a Tenants, not {tenants!r}"
            )
        self.tenants = tenants
        if callable(definitions):
            self._definitions_of: Callable[[str], Iterable[Definition]] = definitions
        else:
            fixed = _checked(definitions)
            self._definitions_of = lambda tenant: fixed
        for name, value in (("workers", workers), ("batch_size", batch_size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise DefinitionError(f"{name} must be an int >= 1, not {value!r}")
        most_open = tenants.most_open if most_open is None else most_open
        if isinstance(most_open, bool) or not isinstance(most_open, int) or most_open < 1:
            raise DefinitionError(f"most_open must be an int >= 1, not {most_open!r}")
        for name, seconds in (("idle", idle), ("discover_every", discover_every)):
            if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds <= 0:
                raise DefinitionError(f"{name} must be seconds > 0, not {seconds!r}")
        if lease_ttl is not None and (not isinstance(lease_ttl, int | float) or lease_ttl <= 0):
            raise DefinitionError(f"lease_ttl must be seconds > 0 or None, not {lease_ttl!r}")
        self.workers = workers
        """The runner's threads: at most this many tenants are served at once."""
        self.batch_size = batch_size
        self.lease_ttl = lease_ttl
        self.owner = f"{os.uname().nodename}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.databases = TenantDatabases(most_open)
        """Each tenant's read-model database, at most `most_open` connected at once."""
        self.stopped: dict[tuple[str, str], ProjectionStopped] = {}
        """(tenant, projection) that a handler failure under the "stop" policy stopped,
        until they are caught up or started again."""
        self._discover = tenants.known if discover == "placement" else discover
        if self._discover is not None and not callable(self._discover):
            raise DefinitionError(f'discover is a function, "placement" or None, not {discover!r}')
        self._discover_every = float(discover_every)
        self._discovered_at = -float("inf")
        self._discovering = False
        self._turn = turn
        self._turns = TenantTurns(float(idle))
        self._served: dict[str, _Served] = {}
        self._lags: dict[tuple[str, str], int] = {}
        self._state = threading.Lock()
        self._progress = threading.Condition()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        for tenant in tenant_ids:
            self.serve(tenant)
        telemetry.watch_tenants(self)

    # --- which tenants -------------------------------------------------------------

    def serve(self, tenant: str) -> None:
        """Serve `tenant` from now on (its first turn comes at once); nothing if it is
        served. `InvalidTenant` if the tenant id is refused.

        Example::

            from eventcraft.eventstore import Tenants
            from eventcraft.projections import Subscription, TenantsRunner

            with Tenants("memory://") as tenants:
                with TenantsRunner(tenants, [Subscription("mail", print)]) as runner:
                    runner.serve("acme")
                    runner.serve("acme")  # once is enough
                    assert runner.served() == ["acme"]
        """
        if tenant in self._served:
            return
        store = self.tenants.for_tenant(tenant)  # checks the id and its place
        with self._state:
            if tenant in self._served:
                store.close()
                return
            self._served[tenant] = _Served(store)
        self._turns.add(tenant)

    def stop_serving(self, tenant: str) -> None:
        """Serve `tenant` no more, once its turn (if it is having one) ends: before it is
        dropped, say. Its checkpoints stay where they are.

        Example::

            from eventcraft.eventstore import Tenants
            from eventcraft.projections import Subscription, TenantsRunner

            with Tenants("memory://") as tenants:
                with TenantsRunner(tenants, [Subscription("mail", print)]) as runner:
                    runner.serve("acme")
                    runner.stop_serving("acme")
                    assert runner.served() == []
        """
        self._turns.remove(tenant)
        with self._turns.claimed(tenant):
            self._let_go(tenant)

    def served(self) -> list[str]:
        """The tenants served, in the order they were first served."""
        return self._turns.served()

    def nudge(self, tenant: str) -> None:
        """Give `tenant` its turn at once (after the tenants whose turn came before): call
        it after appending to the tenant, not to wait up to `idle` seconds. Serves the
        tenant if it was not served."""
        self.serve(tenant)
        self._turns.nudge(tenant)

    # --- running -------------------------------------------------------------------

    def start(self) -> TenantsRunner:
        """Serve the tenants in `workers` background threads."""
        self._stopping.clear()
        with self._state:
            self.stopped.clear()
        self._threads = [t for t in self._threads if t.is_alive()]
        for number in range(len(self._threads), self.workers):
            thread = threading.Thread(
                target=self._work, name=f"tenants-runner:{number}", daemon=True
            )
            self._threads.append(thread)
            thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving; each worker finishes its turn, then the leases held are given up."""
        self._stopping.set()
        self._turns.close()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(deadline - time.monotonic(), 0))
        self._turns.reopen()
        for tenant in self.served():
            self._release_leases(tenant)

    def run(self) -> None:
        """Serve the tenants in this thread's stead until `stop()` or Ctrl-C."""
        self.start()
        try:
            while not self._stopping.wait(0.5):
                pass
        except KeyboardInterrupt:
            pass
        finally:
            self.stop()

    def catch_up(self, *tenants: str) -> None:
        """Apply everything up to each tenant's head now (every tenant served, or those
        named, which are served from now on), in this thread, then return. Raises
        `ProjectionStopped` if a handler failure stops a projection.

        Example::

            from eventcraft.eventstore import NewEvent, Tenants
            from eventcraft.projections import Subscription, TenantsRunner

            mailed = []
            with Tenants("memory://") as tenants:
                tenants.for_tenant("acme").append("order-1", [NewEvent("OrderPaid", {})])
                with TenantsRunner(tenants, [Subscription("mail", mailed.append)]) as runner:
                    runner.catch_up("acme", "globex")  # globex has nothing yet
            assert [event.stream_id for event in mailed] == ["order-1"]
        """
        self._discover_now(force=True)
        for tenant in tenants:
            self.serve(tenant)
        for tenant in tenants or tuple(self.served()):
            with self._turns.claimed(tenant):
                with self._state:
                    for key in [key for key in self.stopped if key[0] == tenant]:
                        del self.stopped[key]
                while self._one_turn(tenant, raising=True):
                    pass

    def close(self) -> None:
        """Stop, and close what the runner opened (not the `Tenants`)."""
        telemetry.unwatch_tenants(self)
        self.stop()
        with self._state:
            served, self._served = list(self._served.values()), {}
        for one in served:
            one.store.close()
        self.databases.close()

    def __enter__(self) -> TenantsRunner:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _work(self) -> None:
        turns = self._turns
        while not self._stopping.is_set():
            self._discover_now()
            tenant = turns.take(self._stopping, self._discover_every)
            if tenant is None:
                continue
            more = False
            try:
                more = self._one_turn(tenant, raising=False)
            finally:
                turns.give_back(tenant, more=more)

    def _one_turn(self, tenant: str, *, raising: bool) -> bool:
        """One batch of each of `tenant`'s definitions, then `turn`: whether it has more
        to do at once. A failure is logged and the tenant waits (`raising=False`)."""
        served = self._served.get(tenant)
        if served is None:
            return False
        try:
            more = self._batches(tenant, served)
            if self._turn is not None:
                more = self._turn(tenant) or more
        except ProjectionStopped:
            if raising:
                raise
            return False  # kept in `stopped`: the others go on
        except Exception as error:
            if raising:
                raise
            if isinstance(error, StoreUnavailable) and self._gone(tenant):
                log.info("tenant %r was dropped: no longer served", tenant)
                self._let_go(tenant)
                return False
            self._failed(tenant, served, error)
            return False
        served.backoff = FIRST_BACKOFF
        return more

    def _gone(self, tenant: str) -> bool:
        """Whether `tenant` has no place any more (it was dropped), as the placement says;
        False when it cannot say (tenants placed by a function, the database away)."""
        try:
            return tenant not in self.tenants.known()
        except Exception:
            return False

    def _let_go(self, tenant: str) -> None:
        """Serve `tenant` no more, its store and database closed (the caller holds it)."""
        self._turns.remove(tenant)
        with self._state:
            served = self._served.pop(tenant, None)
            for key in [key for key in self._lags if key[0] == tenant]:
                del self._lags[key]
        if served is not None:
            self.databases.forget(tenant)
            served.store.close()

    def _batches(self, tenant: str, served: _Served) -> bool:
        store = served.store
        head = store.high_water_mark()
        more = False
        with self.databases.using(tenant, store) as database:
            if served.definitions is None:
                self._set_up(tenant, served, database)
            for name, projector in served.projectors.items():
                if (tenant, name) in self.stopped or projector.position >= head:
                    self._lagging(tenant, name, head - projector.position)
                    continue
                if not projector.acquire():
                    continue  # another runner's, for now
                try:
                    projector.step()
                except ProjectionStopped as stopped:
                    telemetry.stopped(stopped)
                    with self._state:
                        self.stopped[(tenant, name)] = stopped
                    self._notify()
                    raise
                self._lagging(tenant, name, head - projector.position)
                more = more or projector.position < head
        return more

    def _lagging(self, tenant: str, name: str, behind: int) -> None:
        """Note how far `tenant`'s projection `name` is behind its head, for the gauge."""
        with self._state:
            self._lags[(tenant, name)] = max(behind, 0)

    def _set_up(self, tenant: str, served: _Served, database: Database) -> None:
        """`tenant`'s checkpoint table and each definition's row and first tables, once."""
        definitions = _checked(self._definitions_of(tenant))
        with database.transaction() as connection:
            schema.create(connection)
        projectors = {}
        for definition in definitions:
            projector = Projector(
                served.store,
                database,
                definition,
                owner=self.owner,
                batch_size=self.batch_size,
                lease_ttl=self.lease_ttl,
                stopping=self._stopping,
            )
            projector.on_commit = self._notify
            projector.setup()
            projectors[definition.name] = projector
        served.projectors = projectors
        served.definitions = definitions

    def _failed(self, tenant: str, served: _Served, error: Exception) -> None:
        """A turn failed: said, and the tenant waits longer after each failed turn."""
        wait = jittered(served.backoff)
        what = "cannot be reached" if is_outage(error) else "failed"
        log.warning(
            "tenant %r: a turn %s; trying again in %.1f s: %s",
            tenant,
            what,
            wait,
            telemetry.traced(error),
            extra={"tenant": tenant},
        )
        served.backoff = next_backoff(served.backoff)
        self._stopping.wait(wait)

    def _discover_now(self, *, force: bool = False) -> None:
        """Serve the tenants `discover` names, if it is time to ask (one worker asks)."""
        if self._discover is None:
            return
        with self._state:
            due = force or time.monotonic() - self._discovered_at >= self._discover_every
            if not due or self._discovering:
                return
            self._discovering = True
        try:
            for tenant in self._discover():
                self.serve(tenant)
        except UnsupportedStoreURL as error:
            # Tenants placed by a function: only the application knows where they are.
            log.warning("the tenants are served as given, not discovered: %s", error)
            self._discover = None
        except Exception as error:
            log.warning("the tenants could not be discovered: %s", telemetry.traced(error))
        finally:
            with self._state:
                self._discovering = False
                self._discovered_at = time.monotonic()

    def _release_leases(self, tenant: str) -> None:
        served = self._served.get(tenant)
        if served is None or self.lease_ttl is None:
            return
        for projector in served.projectors.values():
            if projector.holds_lease:
                try:
                    projector.release()
                except Exception:
                    log.exception(
                        "tenant %r: %r could not release its lease", tenant, projector.name
                    )

    def _notify(self) -> None:
        with self._progress:
            self._progress.notify_all()

    # --- reading your writes, status ---------------------------------------------------

    def wait_until(
        self,
        tenant: str,
        position: int,
        timeout: float = 10.0,
        names: Sequence[str] | None = None,
    ) -> None:
        """Block until `tenant`'s projections (or those `names`d) have applied up to
        `position` of the tenant's log; the tenant is served, and nudged. Raises
        `ProjectionStopped` as soon as one that is behind has stopped in this runner, and
        `ProjectionTimeout` naming the laggards."""
        self.nudge(tenant)
        deadline = time.monotonic() + timeout
        pause = 0.001
        while True:
            behind = self._behind(tenant, position, names)
            if not behind:
                return
            for name in sorted(behind):
                stopped = self.stopped.get((tenant, name))
                if stopped is not None:
                    raise ProjectionStopped(
                        stopped.name, stopped.position, stopped.error
                    ) from stopped.error
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ProjectionTimeout(position, behind, timeout, tenant)
            with self._progress:
                self._progress.wait(min(pause, remaining))
            pause = min(pause * 2, _POLL_CEILING)

    def _behind(self, tenant: str, position: int, names: Sequence[str] | None) -> dict[str, int]:
        """The projections of `tenant` that have not applied up to `position`, and where
        they are; from the checkpoints in its database once its turn set them up."""
        served = self._served.get(tenant)
        if served is None or served.definitions is None:
            wanted = list(names or (d.name for d in _checked(self._definitions_of(tenant))))
            return {name: 0 for name in wanted}
        known = [d.name for d in served.definitions]
        for name in names or ():
            if name not in known:
                raise UnknownProjection(f"no projection {name!r} for tenant {tenant!r}: {known}")
        at = self._checkpoints(tenant, served, list(names or known))
        return {name: found for name, found in at.items() if found < position}

    def _checkpoints(self, tenant: str, served: _Served, names: list[str]) -> dict[str, int]:
        """The checkpoint of each of `names` (0 for one without a row yet)."""
        with (
            self.databases.using(tenant, served.store) as database,
            database.reading() as connection,
        ):
            rows = checkpoint.read_many(connection, names)
        return {name: rows[name].position if name in rows else 0 for name in names}

    def checkpoints(self, tenant: str) -> dict[str, int]:
        """Each of `tenant`'s projections' checkpoint, by name, as its database has it
        (empty before its first turn).

        Example::

            from eventcraft.eventstore import NewEvent, Tenants
            from eventcraft.projections import Subscription, TenantsRunner

            with Tenants("memory://") as tenants:
                tenants.for_tenant("acme").append("order-1", [NewEvent("OrderPaid", {})])
                with TenantsRunner(tenants, [Subscription("mail", print)]) as runner:
                    assert runner.checkpoints("acme") == {}  # not served yet
                    runner.catch_up("acme")
                    assert runner.checkpoints("acme") == {"mail": 1}
        """
        served = self._served.get(tenant)
        if served is None or served.definitions is None:
            return {}
        return self._checkpoints(tenant, served, [d.name for d in served.definitions])

    def status(self, tenant: str) -> list[ProjectionStatus]:
        """Where each of `tenant`'s projections stands (counted from its store and its
        database now); empty before the tenant's first turn."""
        served = self._served.get(tenant)
        if served is None or served.definitions is None:
            return []
        with self.databases.using(tenant, served.store) as database:
            return status.collect(served.store, database, served.definitions)

    def lags(self) -> dict[tuple[str, str], int]:
        """Per (tenant, projection), how many positions of the tenant's log it was behind
        at the tenant's last turn: what the lag gauge reports, without opening a store.
        An upper bound on the events it will apply (it reads only its own)."""
        with self._state:
            return dict(self._lags)

    # --- rebuilding ----------------------------------------------------------------------

    def rebuild(
        self, tenant: str, name: str, *, progress: bool | Callable[[int, int], None] = False
    ) -> RebuildReport:
        """Replay `tenant`'s projection `name` from the start into new tables and swap them
        in, as `ProjectionRunner.rebuild` does; the other tenants are served meanwhile.

        Example::

            import sqlalchemy as sa
            from eventcraft.eventstore import NewEvent, Tenants
            from eventcraft.projections import Projection, TenantsRunner

            totals = sa.Table("totals", sa.MetaData(), sa.Column("id", sa.Text, primary_key=True))
            order_totals = Projection("totals", tables=[totals])

            @order_totals.on("OrderPaid")
            def paid(read_model, event):
                read_model.execute(sa.insert(read_model[totals]).values(id=event.stream_id))

            with Tenants("memory://") as tenants:
                acme = tenants.for_tenant("acme")
                acme.append("order-1", [NewEvent("OrderPaid", {"cents": 900})])
                with TenantsRunner(tenants, [order_totals]) as runner:
                    runner.catch_up("acme")
                    report = runner.rebuild("acme", "totals")
            assert (report.generation, report.events) == (2, 1)
        """
        self.serve(tenant)
        with self._turns.claimed(tenant):
            served = self._served[tenant]
            with self.databases.using(tenant, served.store) as database:
                if served.definitions is None:
                    self._set_up(tenant, served, database)
                projector = served.projectors.get(name)
                if projector is None:
                    raise UnknownProjection(
                        f"no projection {name!r} for tenant {tenant!r}: {sorted(served.projectors)}"
                    )
                report = rebuild(served.store, database, projector.definition, progress=progress)
        self._notify()
        return report


def _checked(definitions: Iterable[Definition]) -> tuple[Definition, ...]:
    """`definitions` as a tuple, each a `Definition`, their names unique."""
    checked = tuple(definitions)
    for definition in checked:
        if not isinstance(definition, Definition):
            raise DefinitionError(
                f"a runner runs Projection, Fold and Subscription definitions, not {definition!r}"
            )
    names = [d.name for d in checked]
    if len(set(names)) != len(names):
        raise DefinitionError(f"projection names must be unique, got {names}")
    return checked
