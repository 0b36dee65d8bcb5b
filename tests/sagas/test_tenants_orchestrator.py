"""One service runs every tenant's sagas: each tenant's steps see its own data alone, and
take effect once, while two such services serve the same tenants at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from eventcraft.eventstore import NewEvent, Tenants
from eventcraft.sagas import (
    ProcessManager,
    Route,
    Saga,
    SagaDefinitionError,
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
        assert context.tenant is not None
        with self.engine.begin() as connection:
            connection.execute(
                sa.insert(calls_table).values(
                    tenant=context.tenant, key=context.idempotency_key, data_tenant=data["tenant"]
                )
            )
            effect = {"tenant": context.tenant, "key": context.idempotency_key, "sku": data["sku"]}
            connection.execute(sa.insert(effects_table).prefix_with("OR IGNORE").values(effect))
        return {"reserved": data["sku"]}

    def rows(self, table: sa.Table) -> list[tuple[str, ...]]:
        with self.engine.connect() as connection:
            return [tuple(row) for row in connection.execute(sa.select(table)).all()]


def fulfilment_of(warehouse: Warehouse) -> tuple[Saga, Any]:
    fulfilment = Saga("fulfilment", [Step("reserve", warehouse.reserve)])

    def managers(orchestrator: Any) -> list[ProcessManager]:
        route = Route("OrderPlaced", fulfilment, "start", saga_id=lambda event: event.stream_id)
        return [ProcessManager("fulfilment-manager", orchestrator, [route])]

    return fulfilment, managers


def test_each_tenants_saga_steps_see_its_own_data_and_take_effect_once(tmp_path: Path) -> None:
    warehouse = Warehouse(tmp_path / "warehouse.db")
    fulfilment, managers = fulfilment_of(warehouse)
    template = f"sqlite:///{tmp_path}/{{tenant}}.db"
    names = [f"shop-{n}" for n in range(6)]
    orders = [f"order-{n}" for n in range(1, 6)]  # the same stream ids in every tenant
    with Tenants(template, most_open=2) as first, Tenants(template, most_open=2) as second:
        services = [
            TenantsOrchestrator(
                tenants, [fulfilment], managers=managers, workers=2, tenant_ids=names, idle=0.05
            )
            for tenants in (first, second)
        ]
        try:
            for service in services:
                service.start()  # two services, serving the same tenants at once
            for order in orders:
                for name in names:
                    data = {"tenant": name, "sku": f"{name}/{order}"}
                    first.for_tenant(name).append(order, [NewEvent("OrderPlaced", data)])
            for name in names:
                services[0].runner.wait_until(name, first.for_tenant(name).high_water_mark())
                for order in orders:
                    services[1].wait_until_finished(name, "fulfilment", order, timeout=60)
            results = {
                (name, order): services[0]
                .orchestrator(name)
                .state("fulfilment", order)
                .results["reserve"]
                for name in names
                for order in orders
            }
        finally:
            for service in services:
                service.close()
    calls = warehouse.rows(calls_table)
    assert all(tenant == data_tenant for tenant, _, data_tenant in calls)  # never another's
    assert len(calls) >= len(names) * len(orders)
    effects = sorted(warehouse.rows(effects_table))
    assert effects == sorted(
        (name, f"saga-fulfilment:{order}/reserve", f"{name}/{order}")
        for name in names
        for order in orders
    )  # once each, in its own tenant
    assert results == {
        (name, order): {"reserved": f"{name}/{order}"} for name in names for order in orders
    }


def test_a_saga_started_in_one_tenant_is_not_seen_in_another(tmp_path: Path) -> None:
    warehouse = Warehouse(tmp_path / "warehouse.db")
    fulfilment, _ = fulfilment_of(warehouse)
    with (
        Tenants(f"sqlite:///{tmp_path}/{{tenant}}.db") as tenants,
        TenantsOrchestrator(tenants, [fulfilment]) as service,
    ):
        service.start_saga("acme", fulfilment, {"tenant": "acme", "sku": "tea"}, saga_id="s-1")
        service.run_pending()
        acme, globex = service.orchestrator("acme"), service.orchestrator("globex")
        assert acme.state("fulfilment", "s-1").status == "completed"
        assert [saga.saga_id for saga in acme.instances()] == ["s-1"]
        assert list(globex.instances()) == []
    assert warehouse.rows(effects_table) == [("acme", "saga-fulfilment:s-1/reserve", "tea")]


def test_a_tenants_orchestrator_refuses_what_is_no_saga() -> None:
    with Tenants("memory://") as tenants, pytest.raises(SagaDefinitionError, match="Saga"):
        TenantsOrchestrator(tenants, ["fulfilment"])  # type: ignore[list-item]
