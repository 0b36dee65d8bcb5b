"""`Tenants` and `AsyncTenants`: at most `most_open` tenant stores open, the least recently
used idle one closed for another, never one a call uses; a tenant's store as callers hold
it (closed alone, refused once its tenant is dropped)."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Generator
from pathlib import Path
from typing import cast

import pytest
from eventcraft.eventstore import (
    AsyncEventStore,
    AsyncTenants,
    EventStore,
    InvalidTenant,
    NewEvent,
    RecordedEvent,
    StoreUnavailable,
    Tenants,
    TenantStoresBusy,
    async_tenants,
    tenants,
)

from ..docs.test_docstring_examples import example_of, run_example


@pytest.fixture
def template(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/{{tenant}}.db"


def placed(store: EventStore, stream: str = "order-1") -> None:
    store.append(stream, [NewEvent("Placed", {}), NewEvent("Paid", {})])


def test_the_least_recently_used_idle_store_is_closed_for_another(template: str) -> None:
    with Tenants(template, most_open=2) as all_tenants:
        for tenant in ["acme", "globex"]:
            placed(all_tenants.for_tenant(tenant))
        assert all_tenants.open_tenants() == ["acme", "globex"]
        all_tenants.for_tenant("acme").stream_version("order-1")  # acme: the most recent
        placed(all_tenants.for_tenant("initech"))
        assert all_tenants.open_tenants() == ["acme", "initech"]
        assert all_tenants.for_tenant("globex").stream_version("order-1") == 2  # opened again
        assert all_tenants.open_tenants() == ["initech", "globex"]


def test_a_store_a_call_uses_is_never_closed_for_another(template: str) -> None:
    with Tenants(template, most_open=1, wait=0.05) as all_tenants:
        acme, globex = all_tenants.for_tenant("acme"), all_tenants.for_tenant("globex")
        placed(acme)
        reading = acme.read_stream("order-1")
        assert next(reading).type == "Placed"  # acme's store is in use until the read ends
        with pytest.raises(TenantStoresBusy) as busy:
            globex.stream_version("order-1")
        assert (busy.value.size, busy.value.timeout) == (1, 0.05)
        assert "all 1 tenant stores that may be open at once stayed in use" in str(busy.value)
        assert isinstance(busy.value, StoreUnavailable)  # an outage to retry, for callers
        assert [event.type for event in reading] == ["Paid"]
        assert all_tenants.open_tenants() == ["acme"]
        assert globex.stream_version("order-1") == 0
        assert all_tenants.open_tenants() == ["globex"]


def test_a_read_left_unfinished_ends_its_use_once_closed(template: str) -> None:
    with Tenants(template, most_open=1, wait=0.05) as all_tenants:
        placed(all_tenants.for_tenant("acme"))
        reading = cast(
            "Generator[RecordedEvent, None, None]", all_tenants.for_tenant("acme").read_all()
        )
        next(reading)
        reading.close()  # what a dropped generator does, as the collector closes it
        assert all_tenants.for_tenant("globex").stream_version("order-1") == 0


def test_a_call_waits_for_a_store_to_become_idle(template: str) -> None:
    with Tenants(template, most_open=1, wait=30) as all_tenants:
        placed(all_tenants.for_tenant("acme"))
        reading = all_tenants.for_tenant("acme").read_stream("order-1")
        next(reading)
        answered: list[int] = []
        waiting = threading.Thread(
            target=lambda: answered.append(
                all_tenants.for_tenant("globex").stream_version("order-1")
            )
        )
        waiting.start()
        waiting.join(0.2)
        assert waiting.is_alive() and answered == []  # waits: acme's store is in use
        list(reading)
        waiting.join(30)
        assert answered == [0]


def test_a_closed_tenant_store_is_closed_alone(template: str) -> None:
    with Tenants(template) as all_tenants:
        first, second = all_tenants.for_tenant("acme"), all_tenants.for_tenant("acme")
        placed(first)
        first.close()
        with pytest.raises(StoreUnavailable, match="the event store is closed"):
            first.stream_version("order-1")
        assert second.stream_version("order-1") == 2
        first.close()  # again: nothing
    with pytest.raises(StoreUnavailable, match="the event store is closed"):
        second.stream_version("order-1")
    with pytest.raises(StoreUnavailable, match="the event store is closed"):
        all_tenants.for_tenant("acme")


def test_a_dropped_tenants_stores_are_gone_and_a_new_one_begins_empty(template: str) -> None:
    with Tenants(template) as all_tenants:
        acme, other = all_tenants.for_tenant("acme"), all_tenants.for_tenant("acme")
        placed(acme)
        dropped = acme.drop_tenant()
        assert (dropped.place.tenant, dropped.existed) == ("acme", True)
        for stale in (acme, other):
            with pytest.raises(StoreUnavailable):
                stale.append("order-1", [NewEvent("Placed", {})])
        with pytest.raises(StoreUnavailable, match="tenant 'acme' was dropped"):
            other.stream_version("order-1")
        assert all_tenants.for_tenant("acme").stream_version("order-1") == 0


def test_a_drop_waits_for_the_calls_that_use_the_tenants_store(template: str) -> None:
    with Tenants(template, wait=30) as all_tenants:
        acme = all_tenants.for_tenant("acme")
        placed(acme)
        reading = all_tenants.for_tenant("acme").read_stream("order-1")
        next(reading)
        dropping = threading.Thread(target=acme.drop_tenant)
        dropping.start()
        dropping.join(0.2)
        assert dropping.is_alive()
        assert [event.type for event in reading] == ["Paid"]  # the read ends as it began
        dropping.join(30)
        assert not dropping.is_alive()
        assert not Path(all_tenants.place_of("acme").name).exists()


def test_a_drop_of_a_tenant_that_never_had_a_store_removes_nothing(template: str) -> None:
    with Tenants(template) as all_tenants:
        dropped = all_tenants.for_tenant("acme").drop_tenant()
        assert (dropped.existed, dropped.archives) == (False, ())
        assert all_tenants.open_tenants() == []


def test_a_tenants_store_has_no_tenants_of_its_own(template: str) -> None:
    with Tenants(template) as all_tenants:
        acme = all_tenants.for_tenant("acme")
        with pytest.raises(InvalidTenant, match="this is the store of tenant 'acme' already"):
            acme.for_tenant("globex")
        assert repr(acme) == f"Tenants({template!r}).for_tenant('acme')"
        assert (acme.tenant, acme.url) == ("acme", template.replace("{tenant}", "acme"))


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"most_open": 0}, "most_open must be a whole number above 0, not 0"),
        ({"pool_size": True}, "pool_size must be a whole number above 0, not True"),
        ({"wait": -1}, "wait must be a number of seconds from 0 to 3600, not -1"),
        ({"wait": float("nan")}, "wait must be a number of seconds"),
    ],
)
def test_tenants_refuse_bounds_that_bound_nothing(
    template: str, options: dict[str, object], said: str
) -> None:
    with pytest.raises(InvalidTenant, match=said):
        Tenants(template, **options)  # type: ignore[arg-type]


def test_memory_tenants_keep_their_stores_whatever_the_bound() -> None:
    with Tenants("memory://", most_open=1) as all_tenants:
        for tenant in ["acme", "globex", "initech"]:
            placed(all_tenants.for_tenant(tenant))
        assert all_tenants.for_tenant("acme").stream_version("order-1") == 2
        assert sorted(all_tenants.open_tenants()) == ["acme", "globex", "initech"]


def test_many_threads_on_many_tenants_each_see_their_own_and_the_bound_holds(
    template: str,
) -> None:
    seen_open: list[int] = []
    with Tenants(template, most_open=3, wait=60) as all_tenants:

        def work(worker: int) -> None:
            for round_ in range(10):
                tenant = f"t{(worker + round_) % 8}"
                store = all_tenants.for_tenant(tenant)
                store.append(f"w{worker}-1", [NewEvent("Done", {"tenant": tenant})])
                assert {e.data["tenant"] for e in store.read_all()} == {tenant}
                seen_open.append(len(all_tenants.open_tenants()))

        threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        counts = {
            tenant: all_tenants.for_tenant(f"t{tenant}").high_water_mark() for tenant in range(8)
        }
    assert sum(counts.values()) == 60
    assert max(seen_open) <= 3


def test_async_tasks_on_many_tenants_each_see_their_own(template: str) -> None:
    async def main() -> dict[str, int]:
        async with AsyncTenants(template, most_open=2, wait=60) as all_tenants:

            async def work(worker: int) -> None:
                for round_ in range(10):
                    tenant = f"t{(worker + round_) % 5}"
                    store = all_tenants.for_tenant(tenant)
                    await store.append(f"w{worker}-1", [NewEvent("Done", {"tenant": tenant})])
                    read = [e.data["tenant"] async for e in store.read_all()]
                    assert set(read) == {tenant}
                    assert len(all_tenants.open_tenants()) <= 2

            await asyncio.gather(*(work(n) for n in range(6)))
            return {
                t: await all_tenants.for_tenant(t).high_water_mark()
                for t in ["t0", "t1", "t2", "t3", "t4"]
            }

    assert sum(asyncio.run(main()).values()) == 60


@pytest.mark.parametrize(
    ("module", "store"), [(async_tenants, AsyncEventStore), (tenants, EventStore)]
)
def test_every_call_of_a_store_is_a_tenant_stores_own(module: object, store: type) -> None:
    """A method the store gains and the tenant's store does not take over would run on
    a store with no backend: each is the tenant store's own."""
    facade = module._TenantStore  # type: ignore[attr-defined]
    public = {name for name in dir(store) if not name.startswith("_")} - {"open"}
    assert public <= set(vars(facade)), public - set(vars(facade))
    for name in public:
        ours, theirs = getattr(facade, name), getattr(store, name)
        if callable(theirs) and name not in ("for_tenant", "drop_tenant", "close"):
            assert inspect.signature(ours) == inspect.signature(theirs), name
            assert ours.__doc__ == theirs.__doc__, name


@pytest.mark.parametrize(
    "method",
    [
        EventStore.for_tenant,
        EventStore.drop_tenant,
        AsyncEventStore.for_tenant,
        AsyncEventStore.drop_tenant,
        Tenants.for_tenant,
        Tenants.place_of,
        Tenants.open_tenants,
        AsyncTenants.for_tenant,
        AsyncTenants.place_of,
        AsyncTenants.open_tenants,
    ],
    ids=lambda method: method.__qualname__,
)
def test_the_tenants_methods_examples_run(
    method: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = example_of(inspect.getdoc(method) or "")
    assert code is not None
    run_example(code, tmp_path, monkeypatch, getattr(method, "__qualname__", ""))


def test_most_connections_is_stated_for_the_bound(template: str) -> None:
    with Tenants(template, most_open=20, pool_size=2) as all_tenants:
        assert all_tenants.most_connections == 20 * (2 * 2 + 2)
