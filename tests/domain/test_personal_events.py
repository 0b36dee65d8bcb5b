"""Domain events and states with personal fields, on every backend and both repositories:
an aggregate loads in the clear until its subject is forgotten, and with the replacement
after, from its events and from its snapshot alike, never with an error."""

from __future__ import annotations

import asyncio
from typing import Annotated

from eventcraft.domain import (
    Aggregate,
    AsyncRepository,
    DomainEvent,
    EventRegistry,
    Repository,
    State,
    evolves,
)
from eventcraft.eventstore import FORGOTTEN, AsyncEventStore, EventStore, Personal

customers = EventRegistry()


@customers.event("CustomerRegistered")
class CustomerRegistered(DomainEvent):
    name: Annotated[str, Personal()]
    """Personal data of the customer whose stream this is."""
    plan: str


@customers.event("CustomerRenamed")
class CustomerRenamed(DomainEvent):
    name: Annotated[str, Personal()]


class CustomerState(State):
    name: Annotated[str, Personal()] = ""
    plan: str = ""
    renames: int = 0

    @evolves
    def registered(self, event: CustomerRegistered) -> CustomerState:
        return self.replace(name=event.name, plan=event.plan)

    @evolves
    def renamed(self, event: CustomerRenamed) -> CustomerState:
        return self.replace(name=event.name, renames=self.renames + 1)


class Customer(Aggregate[CustomerState]):
    category = "customer"
    registry = customers
    snapshot_every = 2

    def register(self, name: str, plan: str) -> None:
        self.record(CustomerRegistered(name=name, plan=plan))

    def rename(self, name: str) -> None:
        self.record(CustomerRenamed(name=name))


def test_an_aggregate_of_a_forgotten_subject_loads_with_the_replacement(
    store: EventStore,
) -> None:
    repo = Repository(store, Customer, snapshot_every=None)
    repo.execute("ada", lambda c: c.register("Ada Lovelace", "gold"), create=True)
    repo.execute("bob", lambda c: c.register("Bob Dylan", "gold"), create=True)
    assert repo.load("ada").state.name == "Ada Lovelace"
    store.forget("customer-ada")
    ada = repo.load("ada")
    assert (ada.state.name, ada.state.plan) == (FORGOTTEN, "gold")
    assert repo.load("bob").state.name == "Bob Dylan"


def test_a_snapshot_of_a_forgotten_subject_loads_with_the_replacement(
    store: EventStore,
) -> None:
    repo = Repository(store, Customer)
    repo.execute("ada", lambda c: c.register("Ada Lovelace", "gold"), create=True)
    repo.execute("ada", lambda c: c.rename("Ada King"))  # version 2: a snapshot
    snapshot = store.load_snapshot("customer-ada")
    assert snapshot is not None and snapshot.data["name"] == "Ada King"
    store.forget("customer-ada")
    snapshot = store.load_snapshot("customer-ada")
    assert snapshot is not None and snapshot.data["name"] == FORGOTTEN
    ada = repo.load("ada")
    assert (ada.state.name, ada.state.renames, ada.version) == (FORGOTTEN, 1, 2)
    # The aggregate goes on: new personal data is sealed with a new key.
    repo.execute("ada", lambda c: c.rename("A. A. Lovelace"))
    assert repo.load("ada").state.name == "A. A. Lovelace"


def test_the_async_repository_sees_the_same(store_url: str) -> None:
    async def test() -> None:
        async with await AsyncEventStore.open(store_url) as store:
            repo = AsyncRepository(store, Customer)
            await repo.execute("ada", lambda c: c.register("Ada Lovelace", "gold"), create=True)
            await repo.execute("ada", lambda c: c.rename("Ada King"))
            assert (await repo.load("ada")).state.name == "Ada King"
            assert await store.forget("customer-ada") == 1
            assert (await repo.load("ada")).state.name == FORGOTTEN
            names = [e.data["name"] async for e in store.read_stream("customer-ada")]
            assert names == [FORGOTTEN, FORGOTTEN]

    asyncio.run(asyncio.wait_for(test(), 60))
