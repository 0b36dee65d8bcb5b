"""Many tenants do not mean a pool each without limit: 120 tenants, a schema each on
PostgreSQL, used at once by threads through `Tenants` and by tasks through `AsyncTenants`,
and the server never sees more connections of either than its `most_connections`
(counted in `pg_stat_activity` throughout, by each one's application name)."""

from __future__ import annotations

import asyncio
import random
import threading
import uuid
from collections import Counter
from collections.abc import Iterator

import psycopg
import pytest
from eventcraft.eventstore import AsyncTenants, NewEvent, Tenants
from eventcraft.eventstore.testing.personal import Registered

from ..conftest import PG_URL, _need_postgres

TENANTS = [f"t{n:03d}" for n in range(120)]
CALLS = 150
"""Calls each thread and each task makes, each on a tenant drawn at random."""


class Peak:
    """The most connections of each application name seen, looked at until stopped."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.most: Counter[str] = Counter()
        self.looks = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        with psycopg.connect(PG_URL, autocommit=True, application_name="peak") as conn:
            while not self._stop.is_set():
                rows = conn.execute(
                    "SELECT application_name, count(*) FROM pg_stat_activity "
                    "WHERE application_name = ANY(%s) GROUP BY application_name",
                    (self.names,),
                ).fetchall()
                for name, count in rows:
                    self.most[name] = max(self.most[name], count)
                self.looks += 1
                self._stop.wait(0.005)

    def __enter__(self) -> Peak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)


@pytest.fixture
def prefix() -> Iterator[str]:
    _need_postgres()
    prefix = f"c_{uuid.uuid4().hex[:10]}"
    yield prefix
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        for (schema,) in conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (f"{prefix}\\_%",)
        ).fetchall():
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def _use(store_calls: int, seed: int) -> list[tuple[str, int]]:
    """What a caller does: (tenant, call) pairs, each call one of appends, reads, a wait
    for events (the listener's connection), a personal event (the key table's) and the
    low-water mark (retention's reads)."""
    draw = random.Random(seed)
    return [(draw.choice(TENANTS), draw.randrange(5)) for _ in range(store_calls)]


@pytest.mark.slow
def test_connections_stay_within_the_bound_whatever_the_tenants(prefix: str) -> None:
    sync_name, async_name = f"{prefix}-threads", f"{prefix}-tasks"
    template = f"{PG_URL}?schema={prefix}_{{tenant}}&application_name={{name}}"
    appended: Counter[str] = Counter()
    lock = threading.Lock()

    with (
        Tenants(template.replace("{name}", sync_name), most_open=3, wait=120) as tenants,
        Peak([sync_name, async_name]) as peak,
    ):

        def thread(seed: int) -> None:
            for tenant, kind in _use(CALLS, seed):
                store = tenants.for_tenant(tenant)
                if kind == 0:
                    store.append("order-1", [NewEvent("Placed", {"tenant": tenant})])
                    with lock:
                        appended[tenant] += 1
                elif kind == 1:
                    assert {e.data["tenant"] for e in store.read_stream("order-1")} <= {tenant}
                elif kind == 2:
                    store.wait_for_events(store.high_water_mark(), timeout=0.01)
                elif kind == 3:
                    registered = Registered(customer_id="c1", name="Ada", age=36, plan=tenant)
                    store.append("customer-c1", [NewEvent("Registered", registered)])
                    with lock:
                        appended[tenant] += 1
                else:
                    assert store.low_water_mark() == 0

        async def tasks() -> None:
            async with AsyncTenants(
                template.replace("{name}", async_name), most_open=3, wait=120
            ) as by_tasks:

                async def task(seed: int) -> None:
                    for tenant, kind in _use(CALLS, seed):
                        store = by_tasks.for_tenant(tenant)
                        if kind in (0, 3):
                            await store.append("order-2", [NewEvent("Placed", {"tenant": tenant})])
                            with lock:
                                appended[tenant] += 1
                        elif kind == 1:
                            read = [e.data["tenant"] async for e in store.read_stream("order-2")]
                            assert set(read) <= {tenant}
                        elif kind == 2:
                            await store.wait_for_events(await store.high_water_mark(), 0.01)
                        else:
                            assert await store.low_water_mark() == 0

                await asyncio.gather(*(task(1000 + n) for n in range(6)))
                assert by_tasks.most_connections == 18

        threads = [threading.Thread(target=thread, args=(n,)) for n in range(6)]
        threads.append(threading.Thread(target=asyncio.run, args=(tasks(),)))
        for started in threads:
            started.start()
        for started in threads:
            started.join(600)
        assert not any(started.is_alive() for started in threads)
        used = sorted({tenant for tenant, _ in _all_uses()})
        counted = {t: tenants.for_tenant(t).count_events() for t in used}
        assert tenants.most_connections == 3 * (2 * 2 + 2)

    assert counted == {t: appended[t] for t in used}
    assert len(used) > 100
    assert peak.looks > 100
    assert 0 < peak.most[sync_name] <= 18, peak.most
    assert 0 < peak.most[async_name] <= 18, peak.most
    with psycopg.connect(PG_URL) as conn:
        schemas = conn.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname LIKE %s", (f"{prefix}\\_%",)
        ).fetchone()
    assert schemas == (len(used),)


def _all_uses() -> list[tuple[str, int]]:
    return [use for seed in [*range(6), *range(1000, 1006)] for use in _use(CALLS, seed)]
