"""One service runs every tenant's sagas: each tenant's steps see its own data alone, and
take effect once, while two such services (processes) serve the same tenants at once."""

from __future__ import annotations

from pathlib import Path

import pytest
from eventcraft.eventstore import NewEvent, Tenants
from eventcraft.sagas import SagaDefinitionError, TenantsOrchestrator

from ..processes import PROCESSES
from .tenant_services import (
    Warehouse,
    calls_table,
    effects_table,
    fulfilment_of,
    serve_until_finished,
)


@pytest.mark.slow
def test_each_tenants_saga_steps_see_its_own_data_and_take_effect_once(tmp_path: Path) -> None:
    warehouse = Warehouse(tmp_path / "warehouse.db")
    fulfilment, managers = fulfilment_of(warehouse)
    template = f"sqlite:///{tmp_path}/{{tenant}}.db"
    names = [f"shop-{n}" for n in range(6)]
    orders = [f"order-{n}" for n in range(1, 6)]  # the same stream ids in every tenant
    other = PROCESSES.Process(  # a second service, serving the same tenants at once
        target=serve_until_finished,
        args=(template, str(tmp_path / "warehouse.db"), names, orders),
    )
    with Tenants(template, most_open=2) as tenants:
        service = TenantsOrchestrator(
            tenants, [fulfilment], managers=managers, workers=2, tenant_ids=names, idle=0.05
        )
        try:
            service.start()
            other.start()
            for order in orders:
                for name in names:
                    data = {"tenant": name, "sku": f"{name}/{order}"}
                    tenants.for_tenant(name).append(order, [NewEvent("OrderPlaced", data)])
            for name in names:
                service.runner.wait_until(name, tenants.for_tenant(name).high_water_mark())
                for order in orders:
                    service.wait_until_finished(name, "fulfilment", order, timeout=60)
            results = {
                (name, order): service.orchestrator(name).state("fulfilment", order).results
                for name in names
                for order in orders
            }
        finally:
            service.close()
            other.join(120)
    assert other.exitcode == 0
    calls = warehouse.rows(calls_table)
    assert all(tenant == data_tenant for tenant, _, data_tenant, _ in calls)  # never another's
    assert len(calls) >= len(names) * len(orders)
    effects = sorted(warehouse.rows(effects_table))
    assert effects == sorted(
        (name, f"saga-fulfilment:{order}/reserve", f"{name}/{order}")
        for name in names
        for order in orders
    )  # once each, in its own tenant
    assert results == {
        (name, order): {"reserve": {"reserved": f"{name}/{order}"}}
        for name in names
        for order in orders
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
