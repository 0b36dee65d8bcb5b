"""A warehouse shared by every tenant, and a service running every tenant's sagas, for
the many-tenant orchestrator's tests (forked processes run them: module-level only)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa
from eventcraft.eventstore import Tenants
from eventcraft.sagas import (
    Orchestrator,
    ProcessManager,
    Route,
    Saga,
    Step,
    StepContext,
    TenantsOrchestrator,
)

warehouse_meta = sa.MetaData()
calls_table = sa.Table(
    "calls",
    warehouse_meta,
    sa.Column("tenant", sa.Text, nullable=False),
    sa.Column("key", sa.Text, nullable=False),
    sa.Column("data_tenant", sa.Text, nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
)
effects_table = sa.Table(
    "effects",
    warehouse_meta,
    sa.Column("tenant", sa.Text, primary_key=True),
    sa.Column("key", sa.Text, primary_key=True),
    sa.Column("sku", sa.Text, nullable=False),
)


class Warehouse:
    """A service shared by every tenant, which honours a step's idempotency key within its
    tenant: `(context.tenant, context.idempotency_key)`."""

    def __init__(self, path: Path) -> None:
        self.engine = sa.create_engine(f"sqlite:///{path}", connect_args={"timeout": 60})
        warehouse_meta.create_all(self.engine)

    def reserve(self, data: dict[str, Any], context: StepContext) -> dict[str, Any]:
        import os

        assert context.tenant is not None
        with self.engine.begin() as connection:
            call = {"tenant": context.tenant, "key": context.idempotency_key}
            connection.execute(
                sa.insert(calls_table).values(**call, data_tenant=data["tenant"], pid=os.getpid())
            )
            effect = {**call, "sku": data["sku"]}
            connection.execute(sa.insert(effects_table).prefix_with("OR IGNORE").values(effect))
        return {"reserved": data["sku"]}

    def rows(self, table: sa.Table) -> list[tuple[Any, ...]]:
        with self.engine.connect() as connection:
            return [tuple(row) for row in connection.execute(sa.select(table)).all()]


def fulfilment_of(warehouse: Warehouse) -> tuple[Saga, Any]:
    """The saga each order starts, and the process managers that start it."""
    fulfilment = Saga("fulfilment", [Step("reserve", warehouse.reserve)])

    def managers(orchestrator: Orchestrator) -> list[ProcessManager]:
        route = Route("OrderPlaced", fulfilment, "start", saga_id=lambda event: event.stream_id)
        return [ProcessManager("fulfilment-manager", orchestrator, [route])]

    return fulfilment, managers


def serve_until_finished(
    template: str, warehouse_path: str, names: list[str], orders: list[str]
) -> None:
    """Run every tenant's sagas (a service of its own) until each of `orders` has
    finished in every tenant of `names`."""
    fulfilment, managers = fulfilment_of(Warehouse(Path(warehouse_path)))
    with (
        Tenants(template, most_open=2) as tenants,
        TenantsOrchestrator(
            tenants, [fulfilment], managers=managers, tenant_ids=names, idle=0.05
        ) as service,
    ):
        service.start()
        for name in names:
            for order in orders:
                _wait_for_start(service, name, order)
                service.wait_until_finished(name, "fulfilment", order, timeout=120)


def _wait_for_start(service: TenantsOrchestrator, tenant: str, order: str) -> None:
    """Until the manager (of either service) has started `order`'s saga in `tenant`."""
    import time

    from eventcraft.sagas import SagaNotFound

    deadline = time.monotonic() + 120
    while True:
        try:
            service.orchestrator(tenant).state("fulfilment", order)
            return
        except SagaNotFound:
            assert time.monotonic() < deadline, f"{tenant} {order} never started"
            service.nudge(tenant)
            time.sleep(0.01)
