"""Every tenant's sagas, run by one service with a few threads.

An `Orchestrator` and its process managers serve one store. A `TenantsOrchestrator`
serves every tenant of a `Tenants`: it keeps an `Orchestrator` per tenant (an object,
no thread and no connection: its store is the tenant's, taken per call) and runs them
in the turns of a projections `TenantsRunner`. A tenant's turn delivers a batch to each
of its process managers' subscriptions, then advances its unfinished sagas
(`run_pending`): the runner's `workers` threads serve all tenants, at most the tenants'
`most_open` stores open. A tenant's sagas, their streams, leases and idempotency keys
are in the tenant's store, and its managers' checkpoints in its database: nothing of
one tenant is seen while serving another (`StepContext.tenant` says whose a step is).
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any, Literal

from eventcraft.eventstore import Tenants
from eventcraft.projections import Definition, TenantsRunner
from pydantic import BaseModel

from .definition import Saga
from .errors import SagaDefinitionError
from .orchestrator import Orchestrator
from .process_manager import ProcessManager

Managers = Callable[[Orchestrator], Iterable[ProcessManager]]
"""A tenant's process managers, made for its orchestrator."""


class TenantsOrchestrator:
    """Runs `sagas` in every tenant of `tenants`, with the process managers `managers`
    makes for each tenant's orchestrator, in `workers` threads.

    Each tenant's turn delivers its managers' events, then advances its sagas; a tenant
    with nothing to do is looked at again within `idle` seconds (retries and deadlines
    are met then), or at once after `start_saga` or `nudge`. Which tenants are served,
    and the bound on threads, stores and databases, are the `TenantsRunner`'s
    (`tenant_ids`, `discover`, `most_open`); `lease` is each orchestrator's step lease.

    Example::

        from eventcraft.eventstore import NewEvent, Tenants
        from eventcraft.sagas import ProcessManager, Route, Saga, Step, TenantsOrchestrator

        shipped = []

        def ship(data, context):
            shipped.append((context.tenant, data["to"]))

        delivery = Saga("delivery", [Step("ship", ship)])

        def managers(orchestrator):
            route = Route("OrderPaid", delivery, "start", saga_id=lambda event: event.stream_id)
            return [ProcessManager("delivery-manager", orchestrator, [route])]

        with Tenants("sqlite:///tenant-{tenant}.db", most_open=2) as tenants:
            for tenant, to in [("acme", "Paris"), ("globex", "Oslo")]:
                tenants.for_tenant(tenant).append("order-1", [NewEvent("OrderPaid", {"to": to})])
            with TenantsOrchestrator(tenants, [delivery], managers=managers) as sagas:
                sagas.run_pending()  # or start(): served in threads
                assert sagas.orchestrator("globex").state("delivery", "order-1").finished
        assert sorted(shipped) == [("acme", "Paris"), ("globex", "Oslo")]
    """

    def __init__(
        self,
        tenants: Tenants,
        sagas: Iterable[Saga],
        *,
        managers: Managers | None = None,
        workers: int = 2,
        lease: float = 30.0,
        tenant_ids: Iterable[str] = (),
        discover: Callable[[], Iterable[str]] | Literal["placement"] | None = "placement",
        discover_every: float = 5.0,
        idle: float = 1.0,
        batch_size: int = 500,
        most_open: int | None = None,
    ) -> None:
        self.sagas = tuple(sagas)
        if not all(isinstance(saga, Saga) for saga in self.sagas):
            raise SagaDefinitionError("a TenantsOrchestrator runs Saga definitions")
        if not isinstance(lease, int | float) or lease <= 0:
            raise SagaDefinitionError(f"lease must be seconds > 0, not {lease!r}")
        self.tenants = tenants
        self.lease = float(lease)
        self.owner = f"{os.uname().nodename}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._managers = managers
        self._orchestrators: dict[str, Orchestrator] = {}
        self._state = threading.Lock()
        self.runner = TenantsRunner(
            tenants,
            self._definitions,
            workers=workers,
            discover=discover,
            discover_every=discover_every,
            idle=idle,
            batch_size=batch_size,
            most_open=most_open,
            turn=self._advance,
        )
        """The runner whose turns serve the tenants (its managers' checkpoints, `lags`)."""
        for tenant in tenant_ids:
            self.runner.serve(tenant)

    def orchestrator(self, tenant: str) -> Orchestrator:
        """`tenant`'s orchestrator, on the tenant's store: to start, signal, cancel or read
        its sagas. The tenant is served from now on. `InvalidTenant` if the id is refused.

        Example::

            from eventcraft.eventstore import Tenants
            from eventcraft.sagas import Saga, Step, TenantsOrchestrator

            def book(data, context): ...

            booking = Saga("booking", [Step("book", book)])
            with Tenants("memory://") as tenants:
                with TenantsOrchestrator(tenants, [booking]) as sagas:
                    acme = sagas.orchestrator("acme")
                    acme.start(booking, {"room": 7}, saga_id="b-1")
                    assert acme.tenant == "acme" and sagas.runner.served() == ["acme"]
                    sagas.run_pending("acme")
                    assert acme.state("booking", "b-1").status == "completed"
        """
        found = self._orchestrators.get(tenant)
        if found is not None:
            return found
        store = self.tenants.for_tenant(tenant)  # checks the id
        with self._state:
            found = self._orchestrators.get(tenant)
            if found is None:
                found = Orchestrator(store, self.sagas, lease=self.lease, owner=self.owner)
                self._orchestrators[tenant] = found
        self.runner.serve(tenant)
        return found

    def start_saga(
        self,
        tenant: str,
        saga: Saga,
        data: dict[str, Any] | BaseModel,
        *,
        saga_id: str | None = None,
        **options: Any,
    ) -> str:
        """Start an instance of `saga` in `tenant`'s store (`Orchestrator.start`, with its
        options) and give the tenant its turn at once; the saga id.

        Example::

            from eventcraft.eventstore import Tenants
            from eventcraft.sagas import Saga, Step, TenantsOrchestrator

            def book(data, context): ...

            booking = Saga("booking", [Step("book", book)])
            with Tenants("memory://") as tenants:
                with TenantsOrchestrator(tenants, [booking]) as sagas:
                    sagas.start()
                    saga_id = sagas.start_saga("acme", booking, {"room": 7})
                    sagas.wait_until_finished("acme", "booking", saga_id)
        """
        orchestrator = self.orchestrator(tenant)
        started = orchestrator.start(saga, data, saga_id=saga_id, **options)
        self.runner.nudge(tenant)
        return started

    def wait_until_finished(
        self, tenant: str, name: str, saga_id: str, timeout: float = 10.0
    ) -> None:
        """Block until `tenant`'s instance `saga_id` of saga `name` has finished (its
        turns run it); `TimeoutError` if it has not after `timeout` seconds."""
        orchestrator = self.orchestrator(tenant)
        deadline = time.monotonic() + timeout
        pause = 0.005
        while not orchestrator.state(name, saga_id).finished:
            self.runner.nudge(tenant)
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"saga {name!r} {saga_id!r} of tenant {tenant!r} has not finished "
                    f"after {timeout} s"
                )
            time.sleep(pause)  # its turn runs it, in a worker
            pause = min(pause * 2, 0.1)

    def nudge(self, tenant: str) -> None:
        """Give `tenant` its turn at once (served from now on)."""
        self.orchestrator(tenant)
        self.runner.nudge(tenant)

    def run_pending(self, *tenants: str) -> None:
        """Deliver every tenant's events to its managers and advance its sagas as far as
        they go now (every tenant served, or those named), in this thread."""
        for tenant in tenants:
            self.orchestrator(tenant)
        self.runner.catch_up(*tenants)

    def start(self) -> TenantsOrchestrator:
        """Serve the tenants in the runner's `workers` background threads."""
        self.runner.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving; each worker finishes its turn."""
        self.runner.stop(timeout)

    def run(self) -> None:
        """Serve the tenants in this thread's stead until `stop()` or Ctrl-C."""
        self.runner.run()

    def close(self) -> None:
        """Stop, and close what was opened (not the `Tenants`)."""
        self.runner.close()
        with self._state:
            orchestrators, self._orchestrators = list(self._orchestrators.values()), {}
        for orchestrator in orchestrators:
            orchestrator.store.close()

    def __enter__(self) -> TenantsOrchestrator:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _definitions(self, tenant: str) -> list[Definition]:
        """The subscriptions of `tenant`'s process managers."""
        if self._managers is None:
            return []
        return [manager.subscription() for manager in self._managers(self.orchestrator(tenant))]

    def _advance(self, tenant: str) -> bool:
        """A tenant's turn, after its managers' batches: its sagas advanced as far as they go.
        Those left wait for a signal, a retry's back-off or a deadline: the next turn."""
        self.orchestrator(tenant).run_pending()
        return False
