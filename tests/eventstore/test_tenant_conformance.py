"""A tenant's store, as `Tenants.for_tenant` and `AsyncTenants.for_tenant` give it, passes
the store's conformance suite on every backend: whatever is built on a store works on a
tenant's unchanged. On memory and SQLite another tenant's store holds events the whole
time, which no test of the suite may see, and so do another tenant's rows in the tables of
tenants side by side (`tenancy=shared`), the other tenant appending first: made and used
by a superuser, and by a role that row-level security holds (the tables' owner, forced),
whose statements PostgreSQL plans under the policies."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import cast
from urllib.parse import urlsplit

import psycopg
import pytest
from eventcraft.eventstore import AsyncTenants, EventStore, NewEvent, Tenants
from eventcraft.eventstore.blocking import BlockingEventStore
from eventcraft.eventstore.testing import EventStoreConformance

from ..conftest import PG_URL, _need_postgres

# The store's whole conformance suite again, through each placement a tenant's store can
# have: as the reruns through a replica, a pooler and partitions, `make test` runs it, and
# `make test-fast`, which runs the suite once per backend, leaves it out.
pytestmark = pytest.mark.slow


@pytest.fixture(params=["memory", "sqlite", "postgres", "side-by-side", "side-by-side-role"])
def tenant_template(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Where each tenant's store is, new for each test, on each backend in turn."""
    if request.param == "memory":
        yield "memory://"
    elif request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/{{tenant}}.db"
    elif request.param.startswith("side-by-side"):
        _need_postgres()
        schema = f"t_{uuid.uuid4().hex[:10]}"
        if request.param == "side-by-side":
            yield f"{PG_URL}?schema={schema}&tenancy=shared"
        else:
            with psycopg.connect(PG_URL, autocommit=True) as conn:
                conn.execute(f"CREATE ROLE {schema} LOGIN")  # no superuser: RLS holds it
                for name in (schema, f"{schema}__rows"):
                    conn.execute(f'CREATE SCHEMA "{name}" AUTHORIZATION {schema}')
            parts = urlsplit(PG_URL)
            host = parts.netloc.rpartition("@")[2]
            yield f"postgresql://{schema}@{host}{parts.path}?schema={schema}&tenancy=shared"
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}", "{schema}__rows" CASCADE')
            conn.execute(f"DROP ROLE IF EXISTS {schema}")
    else:
        _need_postgres()
        prefix = f"t_{uuid.uuid4().hex[:10]}"
        yield f"{PG_URL}?schema={prefix}_{{tenant}}"
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            schemas = conn.execute(
                "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (f"{prefix}\\_%",)
            ).fetchall()
            for (schema,) in schemas:
                conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


class _Face(BlockingEventStore):
    """The blocking face over a tenant's async store, on a loop the fixture stops."""

    def close(self) -> None:
        self._wait(self.store.close())


class TestTenantStores(EventStoreConformance):
    @pytest.fixture(params=["sync", "async"])
    def store(self, request: pytest.FixtureRequest, tenant_template: str) -> Iterator[EventStore]:
        """A new, empty tenant's store; on memory and SQLite, beside another's that is not."""
        neighbour = "{tenant}" not in tenant_template or tenant_template.startswith("sqlite")
        if request.param == "sync":
            with Tenants(tenant_template, most_open=2) as tenants:
                if neighbour:
                    tenants.for_tenant("globex").append("order-1", [NewEvent("Elsewhere", {})])
                yield tenants.for_tenant("acme")
            return
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()
        face = _Face(loop, None)
        by_tasks = AsyncTenants(tenant_template, most_open=2)
        try:
            if neighbour:
                globex = by_tasks.for_tenant("globex")
                face._wait(globex.append("order-1", [NewEvent("Elsewhere", {})]))
            face.store = by_tasks.for_tenant("acme")
            yield cast(EventStore, face)
        finally:
            face._wait(by_tasks.close())
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
            loop.close()
