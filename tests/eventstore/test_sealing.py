"""The store's two faces seal and open personal fields by the same steps (`Shredder`): the
sync face asks the key store on the caller's thread, the async face from a thread that is
not its event loop's; a batch refused for an envelope it was given makes no key, and a
forget refuses a subject that is no name before it opens the key store, on both faces."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Collection
from typing import Annotated

import pytest
from eventcraft.eventstore import (
    FORGOTTEN,
    AsyncEventStore,
    EventStore,
    InvalidEvent,
    KeyStore,
    NewEvent,
    Personal,
)
from eventcraft.eventstore.personal.key_table import DataKey, MemoryKeyTable
from pydantic import BaseModel


class Registered(BaseModel):
    customer_id: str
    name: Annotated[str, Personal(subject="customer_id")]


class Watched(MemoryKeyTable):
    """A key table in memory that notes the thread of each call."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, int]] = []

    def live_keys(self, subjects: Collection[str]) -> dict[str, DataKey]:
        self.calls.append(("live_keys", threading.get_ident()))
        return super().live_keys(subjects)

    def keys(self, key_ids: Collection[str]) -> dict[str, DataKey]:
        self.calls.append(("keys", threading.get_ident()))
        return super().keys(key_ids)

    def forget(self, subject: str) -> int:
        self.calls.append(("forget", threading.get_ident()))
        return super().forget(subject)


REGISTERED = Registered(customer_id="c1", name="Ada")
FORGED = {"subject": "x", "key": str(uuid.uuid4()), "fields": ["name"], "sealed": "AAAA"}


def test_the_sync_store_asks_the_key_store_on_the_callers_thread() -> None:
    table = Watched()
    with EventStore.open("memory://", keys=KeyStore(table, cache_seconds=0)) as store:
        store.append("customer-c1", [NewEvent("Registered", REGISTERED)])
        store.save_snapshot("customer-c1", version=1, type="Customer", data=REGISTERED)
        (event,) = store.read_stream("customer-c1")
        assert [e.data["name"] for e in store.read_all()] == ["Ada"]
        found = store.read_event(event.id)
        snapshot = store.load_snapshot("customer-c1")
        assert found is not None and snapshot is not None
        assert found.data["name"] == snapshot.data["name"] == "Ada"
        assert store.forget("c1") == 1
        assert [e.data["name"] for e in store.read_stream("customer-c1")] == [FORGOTTEN]
    assert {name for name, _ in table.calls} == {"live_keys", "keys", "forget"}
    assert {thread for _, thread in table.calls} == {threading.get_ident()}


def test_the_async_store_asks_the_key_store_from_a_thread_not_its_loops() -> None:
    table = Watched()

    async def run() -> int:
        keys = KeyStore(table, cache_seconds=0)
        async with await AsyncEventStore.open("memory://", keys=keys) as store:
            await store.append("customer-c1", [NewEvent("Registered", REGISTERED)])
            await store.save_snapshot("customer-c1", version=1, type="Customer", data=REGISTERED)
            (event,) = [e async for e in store.read_stream("customer-c1")]
            assert [e.data["name"] async for e in store.read_all()] == ["Ada"]
            found = await store.read_event(event.id)
            snapshot = await store.load_snapshot("customer-c1")
            assert found is not None and snapshot is not None
            assert found.data["name"] == snapshot.data["name"] == "Ada"
            assert await store.forget("c1") == 1
            names = [e.data["name"] async for e in store.read_stream("customer-c1")]
            assert names == [FORGOTTEN]
        return threading.get_ident()

    loop_thread = asyncio.run(run())
    assert {name for name, _ in table.calls} == {"live_keys", "keys", "forget"}
    assert loop_thread not in {thread for _, thread in table.calls}


@pytest.mark.parametrize("api", ["sync", "async"])
def test_a_batch_refused_for_an_envelope_it_was_given_makes_no_key(api: str) -> None:
    table = MemoryKeyTable()
    batch = [
        NewEvent("Registered", REGISTERED),  # its key would be made after the check
        NewEvent("Received", {"order": 1, "$personal": [FORGED]}),
    ]
    with pytest.raises(InvalidEvent, match="never held"):
        if api == "sync":
            with EventStore.open("memory://", keys=KeyStore(table)) as store:
                store.append("customer-c1", batch)
        else:

            async def append() -> None:
                async with await AsyncEventStore.open("memory://", keys=KeyStore(table)) as store:
                    await store.append("customer-c1", batch)

            asyncio.run(append())
    assert not table.holds_keys()


@pytest.mark.parametrize("api", ["sync", "async"])
def test_forget_refuses_a_subject_that_is_no_name_before_opening_the_key_store(
    api: str,
) -> None:
    """The key store's URL is one no backend serves: opening it would raise
    `UnsupportedStoreURL`, and the subject is refused first."""
    with pytest.raises(InvalidEvent, match="subject"):
        if api == "sync":
            with EventStore.open("memory://", keys="nowhere://keys") as store:
                store.forget("")
        else:

            async def forget() -> None:
                async with await AsyncEventStore.open("memory://", keys="nowhere://keys") as store:
                    await store.forget("")

            asyncio.run(forget())
