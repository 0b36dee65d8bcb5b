"""Real processes, a tenant each and one tenant shared, claiming the same stream at the
same moment: each process wins every claim in its own tenant, and the two share the
claims of the shared tenant, one winner a round, on SQLite files, PostgreSQL schemas and
tenants side by side in one schema's tables."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import psycopg
import pytest
from eventcraft.eventstore import Tenants

from ..conftest import PG_URL, _need_postgres
from ..processes import PROCESSES
from . import tenant_workers

ROUNDS = 20


@pytest.fixture(params=["sqlite", "postgres", "side-by-side"])
def template(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/{{tenant}}.db"
        return
    _need_postgres()
    prefix = f"p_{uuid.uuid4().hex[:10]}"
    if request.param == "side-by-side":
        yield f"{PG_URL}?schema={prefix}&tenancy=shared"
    else:
        yield f"{PG_URL}?schema={prefix}_{{tenant}}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        for (schema,) in conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (f"{prefix}%",)
        ).fetchall():
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.mark.slow
def test_two_processes_claiming_in_two_tenants_never_meet(template: str) -> None:
    own = ["acme", "globex"]
    with Tenants(template) as tenants:  # the places made before the race
        for tenant in [*own, "shared"]:
            tenants.for_tenant(tenant).high_water_mark()
    with PROCESSES.Manager() as manager, ProcessPoolExecutor(2, mp_context=PROCESSES) as pool:
        barrier = manager.Barrier(2)
        futures = [
            pool.submit(tenant_workers.claim, template, own[w], "shared", w, ROUNDS, barrier)
            for w in range(2)
        ]
        outcomes = [future.result(timeout=300) for future in futures]
    for own_won, _ in outcomes:
        assert own_won == [True] * ROUNDS
    assert [sum(shared[r] for _, shared in outcomes) for r in range(ROUNDS)] == [1] * ROUNDS
    with Tenants(template) as tenants:
        for writer, tenant in enumerate(own):
            claims = list(tenants.for_tenant(tenant).read_all())
            assert [(e.version, e.data["writer"]) for e in claims] == [
                (version, writer) for version in range(1, ROUNDS + 1)
            ]
        shared = list(tenants.for_tenant("shared").read_stream("order-1"))
        assert [e.version for e in shared] == list(range(1, ROUNDS + 1))
        wins = [sum(shared_won) for _, shared_won in outcomes]
        assert [sum(e.data["writer"] == w for e in shared) for w in range(2)] == wins
