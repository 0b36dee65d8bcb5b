"""A saga run on a PostgreSQL store behind PgBouncer in transaction pooling: recorded
before it acts, compensated when a step fails, its stream in the URL's schema."""

from __future__ import annotations

from typing import Any

import pytest
from eventcraft.eventstore import EventStore
from eventcraft.sagas import Orchestrator, Saga, Step

from tests.pgbouncer import pgbouncer, pgbouncer_url  # noqa: F401  (fixtures)

pytestmark = pytest.mark.postgres


@pytest.fixture
def pooled(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue("pgbouncer_url"))


def test_sagas_complete_and_compensate_through_pgbouncer(pooled: str) -> None:
    stock = {"tea": 10}
    charged: list[str] = []

    def reserve(data: dict[str, Any], context: Any) -> dict[str, str]:
        stock[data["sku"]] -= 1
        return {"reservation": context.idempotency_key}

    def release(data: dict[str, Any], context: Any) -> None:
        stock[data["sku"]] += 1

    def charge(data: dict[str, Any], context: Any) -> None:
        if data["card"] == "declined":
            raise ValueError("card declined")
        charged.append(data["order_id"])

    fulfilment = Saga(
        "fulfilment",
        [Step("reserve", reserve, release), Step("charge", charge, fails_on=(ValueError,))],
    )
    with EventStore.open(pooled) as store:
        orchestrator = Orchestrator(store, [fulfilment])
        for n in range(8):  # past psycopg's 5 executions before it would prepare
            card = "declined" if n == 3 else "ok"
            data = {"order_id": str(n), "sku": "tea", "card": card}
            orchestrator.start(fulfilment, data, saga_id=str(n))
        assert orchestrator.run_pending() == 0
        statuses = {str(n): orchestrator.state("fulfilment", str(n)).status for n in range(8)}
        # A restarted orchestrator rebuilds every saga from its stream, through the pooler.
        again = Orchestrator(store, [fulfilment])
        assert again.run_pending() == 0
        rebuilt = {str(n): again.state("fulfilment", str(n)).status for n in range(8)}
    assert statuses == rebuilt
    assert {status for saga_id, status in statuses.items() if saga_id != "3"} == {"completed"}
    assert statuses["3"] == "compensated"
    assert stock == {"tea": 3}  # 7 reserved and kept, the declined one released
    assert sorted(charged) == ["0", "1", "2", "4", "5", "6", "7"]
