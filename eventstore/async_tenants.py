"""`AsyncTenants`: the stores of many tenants, each in a place of its own, no more than
`most_open` of them open at once.

A tenant's store, as `for_tenant` gives it, is an `AsyncEventStore` that a caller may
keep as long as it likes: a repository, a projection runner, a saga's orchestrator or an
inbox is built on it as on any store. It holds no connection itself. Each of its calls
takes the tenant's open store for as long as the call runs (a read: until it has been
read to its end, or closed), opening it first if it is not open; a store that no call
uses is idle, and the least recently used idle store is closed when another tenant's
store must open and `most_open` are open. A store that a call uses is never closed under
it: a call that finds every open store in use waits up to `wait` seconds for one to be
idle, then raises `TenantStoresBusy` having done nothing.

**The bound.** Every connection a tenant's PostgreSQL store opens belongs to one open
store, and at most `most_open` are open, a store being closed before the one that takes
its place opens. An open store connects at most `pool_size` times for its appends and
reads (`?pool_size=` of its URL, which `Tenants` sets), `pool_size` times for its
low-water mark (its retention's reads), once to wake its waiting readers (the
listener) and once to seal and open personal fields (its key table): so the server
sees at most `most_open * (2 * pool_size + 2)` connections of the tenants'
(`most_connections`), and no more while a store opens (one connection of its own, or
two to make a tenant's database), or a tenant is dropped. A tenant store's `retention`
and `keys`, used outside its calls (retention runs, Spark), have connections of their
own, released when the store is closed.

Memory stores (`memory://`) hold no connection and lose their events if closed: every
tenant's is kept until the `AsyncTenants` closes, and `most_open` does not count them.

The sync `Tenants` is generated from this module (`scripts/async_to_sync.py`); where
they differ is how a call waits for a store (a task on an `asyncio.Condition`, a thread
on a `threading.Condition`) and how the tenant's store opens.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from types import TracebackType
from typing import Any, TypeVar, cast

from .async_store import AsyncEventStore
from .async_threaded import ThreadedBackend
from .backends import retention_for
from .encoding import MAX_EVENT_BYTES, check_max_event_bytes
from .errors import STORE_CLOSED, InvalidTenant, StoreUnavailable, TenantStoresBusy
from .memory import MemoryBackend
from .personal.keys import KeyStore
from .retention import Retention
from .tenant_places import (
    Resolver,
    TenantDrop,
    TenantPlace,
    TenantPlaces,
    drop,
    exists,
    pool_sized,
    prepare,
)

MOST_OPEN = 10
"""Default for the most tenant stores open at once (`most_open`)."""
POOL_SIZE = 2
"""Default for the connections of a tenant store's pool (`pool_size`): a group commit
shares one among many appends, and a read holds one only while a page is read."""
KEYS_POOL_SIZE = 1
"""The connections of a tenant store's key table: sealing is a small part of an append."""
WAIT = 30.0
"""Default for the longest a call waits for a tenant store to come free, in seconds."""

F = TypeVar("F", bound=Callable[..., Any])
H = TypeVar("H", Retention, KeyStore)


class _Slot:
    """One tenant's place among the open stores: its store once open, and its users."""

    __slots__ = ("dropping", "memory", "store", "users")

    def __init__(self, memory: bool) -> None:
        self.memory = memory
        """A memory store: never closed to make room, and not counted."""
        self.store: AsyncEventStore | None = None
        """None while the store opens (or, when `dropping`, once it is closed)."""
        self.users = 0
        """Calls running on the store: it is idle at 0."""
        self.dropping = False
        """The tenant is being dropped: no call may take its store."""


class AsyncTenants:
    """The stores of many tenants, each in a place of its own (a PostgreSQL schema or
    database, a SQLite file, a memory store), with at most `most_open` open at once.

    `places` says where each tenant's store is: a URL with `{tenant}` where the tenant's
    name goes (`postgresql://app@db/shop?schema=shop_{tenant}`,
    `postgresql://app@db/shop_{tenant}`, `sqlite:///tenants/{tenant}.db`, or `memory://`),
    or a function from the tenant id to a URL; or every tenant side by side in one
    schema's tables, `postgresql://app@db/shop?schema=shop&tenancy=shared`. A tenant's
    place is made when its store is first used: a schema, a file or a tenant's row by the
    store's opening, a database here first.

    Each tenant's PostgreSQL store has a pool of `pool_size` connections, and the server
    sees at most `most_connections` of them all (see `async_tenants.py`). A call that finds
    `most_open` stores in use waits up to `wait` seconds for one to be idle, then raises
    `TenantStoresBusy`. `max_event_bytes` and `group_commit` are each store's, as
    `AsyncEventStore.open` takes them. Use it, and the stores it gives, from one event
    loop, as an `AsyncEventStore`.

    Example::

        from eventcraft.eventstore import AsyncTenants, NewEvent

        async with AsyncTenants("sqlite:///tenant-{tenant}.db") as tenants:
            acme, globex = tenants.for_tenant("acme"), tenants.for_tenant("globex")
            await acme.append("order-1", [NewEvent("Placed", {"cents": 1250})])
            await globex.append("order-1", [NewEvent("Placed", {"cents": 90})])  # its own order-1
            cents = [e.data["cents"] async for e in acme.read_all()]
        assert cents == [1250]
    """

    def __init__(
        self,
        places: Resolver,
        *,
        most_open: int = MOST_OPEN,
        pool_size: int = POOL_SIZE,
        wait: float = WAIT,
        max_event_bytes: int = MAX_EVENT_BYTES,
        group_commit: bool = True,
    ) -> None:
        for name, value in (("most_open", most_open), ("pool_size", pool_size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidTenant(f"{name} must be a whole number above 0, not {value!r}")
        if isinstance(wait, bool) or not isinstance(wait, int | float) or not 0 <= wait <= 3600:
            raise InvalidTenant(f"wait must be a number of seconds from 0 to 3600, not {wait!r}")
        self._places = TenantPlaces(places, pool_size=pool_size)
        self.most_open = most_open
        """The most tenant stores open at once (memory stores not counted)."""
        self.pool_size = pool_size
        """The connections of each tenant store's pool (PostgreSQL)."""
        self.wait = float(wait)
        """The longest a call waits for a tenant store to come free, in seconds."""
        self.max_event_bytes = check_max_event_bytes(max_event_bytes)
        """Each tenant store's `max_event_bytes`."""
        self._group_commit = group_commit
        self._slots: OrderedDict[str, _Slot] = OrderedDict()  # least recently used first
        self._where: dict[tuple[str, ...], str] = {}  # each place seen, and its tenant
        self._known: dict[str, TenantPlace] = {}  # each tenant's place, read once
        self._drops: dict[str, int] = {}  # how often each tenant was dropped
        self._owned: set[Retention | KeyStore] = set()  # tenant stores' own, open
        self._closed = False
        if True:  # ASYNC
            self._changed = asyncio.Condition()
        else:
            # Reentrant: a read left unfinished may be closed, and end its call, by the
            # garbage collector in a thread that holds the lock already.
            self._changed = threading.Condition(threading.RLock())
        # Checks a tenant's read at the call, as a store checks it (`_leased_read`).
        self._checks = _memory_store(self.max_event_bytes)

    def for_tenant(self, tenant: str) -> AsyncEventStore:
        """The store of `tenant`: only its events, in its own place. `InvalidTenant` if the
        tenant id is refused (`check_tenant`) or its place would be another tenant's.

        Nothing is opened yet: the tenant's store opens when a call first needs it. The
        store given may be kept and shared; closing it closes only what was given (the
        tenant's open store stays for the others, until the `AsyncTenants` closes).

        Example::

            from eventcraft.eventstore import AsyncTenants, NewEvent

            async with AsyncTenants("sqlite:///tenant-{tenant}.db") as tenants:
                acme = tenants.for_tenant("acme")
                await acme.append("order-1", [NewEvent("Placed", {})])
                assert (acme.tenant, await acme.stream_version("order-1")) == ("acme", 1)
                assert await tenants.for_tenant("globex").stream_version("order-1") == 0
        """
        place = self.place_of(tenant)
        with self._state():
            self._check_open()
            generation = self._drops.get(place.tenant, 0)
        return _TenantStore(self, place, generation)

    def place_of(self, tenant: str) -> TenantPlace:
        """Where the store of `tenant` is (nothing is connected to); `InvalidTenant` if the
        tenant id is refused, or its place is one another tenant was given.

        Example::

            from eventcraft.eventstore import AsyncTenants

            async with AsyncTenants("postgresql://app@db.example/shop_{tenant}") as tenants:
                place = tenants.place_of("north-wind")
            assert (place.kind, place.name) == ("database", "shop_north_wind")
        """
        known = self._known.get(tenant) if isinstance(tenant, str) else None
        if known is not None:
            return known
        place = self._places.place(tenant)
        with self._state():
            other = self._where.setdefault(place.where, place.tenant)
            if other == place.tenant:
                self._known[place.tenant] = place
        if other != place.tenant:
            raise InvalidTenant(
                f"tenants {other!r} and {place.tenant!r} would share one place, "
                f"{place.kind} {place.name}: {self._places.description} must give each "
                "tenant a place of its own"
            )
        return place

    async def known(self) -> list[str]:
        """The tenants that have a store now, sorted: found in the template's placement
        (the files or folders it names, its schemas, its databases), or, for `memory://`,
        those this `AsyncTenants` holds. `UnsupportedStoreURL` for tenants placed by a
        function: only a template says where to look.

        A schema or database counts if the template would give it a tenant, whatever made
        it: keep the template's prefix (`shop_`) for tenants alone.

        Example::

            from eventcraft.eventstore import AsyncTenants, NewEvent

            async with AsyncTenants("sqlite:///listed-{tenant}.db") as tenants:
                for tenant in ["globex", "acme"]:
                    await tenants.for_tenant(tenant).append("order-1", [NewEvent("Placed", {})])
                assert await tenants.known() == ["acme", "globex"]
        """
        if self._places.is_memory:
            with self._state():
                self._check_open()
                return sorted(t for t, slot in self._slots.items() if slot.store is not None)
        if True:  # ASYNC
            return await asyncio.to_thread(self._places.known)
        else:
            return self._places.known()

    @property
    def most_connections(self) -> int:
        """The most connections the tenants' PostgreSQL stores hold at once, for their calls:
        `most_open * (2 * pool_size + 2)`.

        Example::

            from eventcraft.eventstore import AsyncTenants

            shops = "postgresql://app@db.example/shop?schema=shop_{tenant}"
            async with AsyncTenants(shops, most_open=20, pool_size=2) as tenants:
                assert tenants.most_connections == 120  # within the server's max_connections
        """
        return self.most_open * (2 * self.pool_size + 2)

    def open_tenants(self) -> list[str]:
        """The tenants whose stores are open now, the least recently used first.

        Example::

            from eventcraft.eventstore import AsyncTenants

            async with AsyncTenants("sqlite:///tenant-{tenant}.db", most_open=2) as tenants:
                for tenant in ["acme", "globex", "initech"]:
                    await tenants.for_tenant(tenant).stream_version("order-1")
                assert tenants.open_tenants() == ["globex", "initech"]  # acme's was closed
        """
        with self._state():
            return [tenant for tenant, slot in self._slots.items() if slot.store is not None]

    async def close(self) -> None:
        """Close every tenant's store (a call still running on one meets a closed store);
        the stores given by `for_tenant` are closed with them. Idempotent."""
        async with self._changed:
            self._closed = True
            stores = [slot.store for slot in self._slots.values() if slot.store is not None]
            self._slots.clear()
            owned, self._owned = self._owned, set()
            self._changed.notify_all()
        for store in stores:
            await store.close()
        for held in owned:
            held.close()

    async def __aenter__(self) -> AsyncTenants:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._places.description!r})"

    # --- taking and giving back a tenant's store -------------------------------------

    async def _take(self, place: TenantPlace, generation: int) -> AsyncEventStore:
        """The open store of `place`'s tenant, for one call, which `_give_back` ends."""
        tenant = place.tenant
        deadline = time.monotonic() + self.wait
        if place.kind == "memory":
            self._kept(place, generation)
        async with self._changed:
            while True:
                self._check_usable(tenant, generation)
                slot = self._slots.get(tenant)
                if slot is not None and slot.store is not None and not slot.dropping:
                    slot.users += 1
                    self._slots.move_to_end(tenant)
                    return slot.store
                if slot is None:
                    room, closing = self._make_room(place)
                    if room:
                        slot = self._slots[tenant] = _Slot(place.kind == "memory")
                        break
                await self._wait_for_change(deadline)
        # Outside the lock: other tenants' calls go on while this store opens. The store
        # that made room is closed first, so no more than `most_open` hold connections.
        try:
            if closing is not None:
                await closing.close()
            store = await self._open(place)
        except BaseException:
            async with self._changed:
                del self._slots[tenant]
                self._changed.notify_all()
            raise
        async with self._changed:
            slot.store, slot.users = store, 1
            self._changed.notify_all()
        return store

    async def _give_back(self, tenant: str) -> None:
        """End a call's use of `tenant`'s store: idle when no other call uses it."""
        async with self._changed:
            slot = self._slots.get(tenant)
            if slot is not None:
                slot.users -= 1
                if slot.users == 0:
                    self._slots.move_to_end(tenant)  # the most recently used
                    self._changed.notify_all()

    def _make_room(self, place: TenantPlace) -> tuple[bool, AsyncEventStore | None]:
        """Whether one more store may open, and the idle store to close first (taken out of
        the open ones), if one must."""
        counted = [t for t, slot in self._slots.items() if not slot.memory]
        if place.kind == "memory" or len(counted) < self.most_open:
            return True, None
        for tenant in counted:
            slot = self._slots[tenant]
            if slot.store is not None and slot.users == 0 and not slot.dropping:
                del self._slots[tenant]
                return True, slot.store
        return False, None

    async def _wait_for_change(self, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TenantStoresBusy(self.most_open, self.wait)
        if True:  # ASYNC
            try:
                async with asyncio.timeout(remaining):
                    await self._changed.wait()
            except TimeoutError:
                pass
        else:
            self._changed.wait(remaining)

    def _kept(self, place: TenantPlace, generation: int) -> AsyncEventStore:
        """The memory store of `place`'s tenant, made if it has none: it is never closed
        (its events would go with it), so it is there for a caller that cannot wait."""
        with self._state():
            self._check_usable(place.tenant, generation)
            slot = self._slots.get(place.tenant)
            if slot is None:
                slot = self._slots[place.tenant] = _Slot(memory=True)
                slot.store = _memory_store(self.max_event_bytes)
            if slot.store is None:
                raise StoreUnavailable(f"tenant {place.tenant!r} is being dropped")
            return slot.store

    async def _open(self, place: TenantPlace) -> AsyncEventStore:
        """The store at `place`, its database or folder made first if missing."""
        if True:  # ASYNC
            await asyncio.to_thread(prepare, place)
        else:
            prepare(place)
        store = await AsyncEventStore.open(
            place.url,
            max_event_bytes=self.max_event_bytes,
            group_commit=self._group_commit,
            keys=_keys_url(place),
        )
        store.tenant = place.tenant  # whose its spans and metrics are (`telemetry.TENANT`)
        return store

    async def _drop(self, place: TenantPlace, generation: int) -> TenantDrop:
        """Remove everything of `place`'s tenant, once no call uses its store: its store
        closed, its place removed whole, with the archive its retention runs wrote."""
        tenant = place.tenant
        deadline = time.monotonic() + self.wait
        closing: AsyncEventStore | None = None
        async with self._changed:
            while True:
                self._check_usable(tenant, generation)
                slot = self._slots.get(tenant)
                idle = slot is not None and slot.store is not None and slot.users == 0
                if slot is not None and idle and not slot.dropping:
                    break
                if slot is None:
                    room, closing = self._make_room(place)
                    if room:
                        slot = self._slots[tenant] = _Slot(place.kind == "memory")
                        break
                await self._wait_for_change(deadline)
            # From here on no call takes the store; those given before the drop end there.
            slot.dropping = True
            self._drops[tenant] = self._drops.get(tenant, 0) + 1
            opened, slot.store = slot.store, None
        try:
            if closing is not None:
                await closing.close()
            if opened is not None:
                await opened.close()
            if place.kind == "memory":
                return TenantDrop(place, opened is not None, ())
            if True:  # ASYNC
                return await asyncio.to_thread(_dropped, place)
            else:
                return _dropped(place)
        finally:
            async with self._changed:
                del self._slots[tenant]
                self._changed.notify_all()

    def _own(self, held: H) -> H:
        """`held`, a tenant store's own retention or keys, closed with the tenants at the
        latest."""
        with self._state():
            self._check_open()
            self._owned.add(held)
        return held

    def _disown(self, held: Retention | KeyStore) -> None:
        with self._state():
            self._owned.discard(held)

    def _check_usable(self, tenant: str, generation: int) -> None:
        if self._closed:
            raise StoreUnavailable(STORE_CLOSED)
        if self._drops.get(tenant, 0) != generation:
            raise StoreUnavailable(f"tenant {tenant!r} was dropped: its store is gone")

    def _check_open(self) -> None:
        if self._closed:
            raise StoreUnavailable(STORE_CLOSED)

    def _state(self) -> AbstractContextManager[Any]:
        """A lock over the tenants' state for code that does not wait (the async
        tenants' state is only touched on its loop, between two awaits)."""
        if True:  # ASYNC
            return nullcontext()
        else:
            return self._changed


def _memory_store(max_event_bytes: int) -> AsyncEventStore:
    if True:  # ASYNC
        backend = ThreadedBackend(MemoryBackend(), in_place=True)
        return AsyncEventStore(backend, "memory://", max_event_bytes=max_event_bytes)
    else:
        return AsyncEventStore(MemoryBackend(), "memory://", max_event_bytes=max_event_bytes)


def _keys_url(place: TenantPlace) -> str | None:
    """The key table's URL: the store's own, with a pool of `KEYS_POOL_SIZE`."""
    if place.kind not in ("schema", "database", "shared"):
        return None
    return pool_sized(place.url, KEYS_POOL_SIZE)


def _dropped(place: TenantPlace) -> TenantDrop:
    """`place` removed, with the archive folders its retention runs name: what it was."""
    archives: list[str] = []
    if exists(place):
        retention = retention_for(place.url)
        try:
            archives = [run.archive for run in retention.runs()]
        finally:
            retention.close()
    return drop(place, archives)


# --- a tenant's store as callers hold it ---------------------------------------------


def _leased(method: F) -> F:
    """The store's `method`, run on the tenant's open store, taken for the call: a method
    with the store's method's signature and docstring."""
    name = method.__name__

    async def call(self: _TenantStore, /, *args: Any, **kwargs: Any) -> Any:
        store = await self._take()
        try:
            return await getattr(store, name)(*args, **kwargs)
        finally:
            await self._tenants._give_back(self._tenant_id)

    return _named(call, method)


def _leased_read(method: F) -> F:
    """The store's read `method`, its arguments checked at the call as the store checks
    them, read from the tenant's open store, taken until the read ends."""
    name = method.__name__

    def call(self: _TenantStore, /, *args: Any, **kwargs: Any) -> Any:
        getattr(self._tenants._checks, name)(*args, **kwargs)  # refused here, or not at all
        return self._read(name, args, kwargs)

    return _named(call, method)


def _named(call: Callable[..., Any], method: F) -> F:
    functools.update_wrapper(call, method, assigned=("__name__", "__doc__"), updated=())
    call.__qualname__ = f"AsyncEventStore.{method.__name__}"
    return cast(F, call)


class _TenantStore(AsyncEventStore):
    """A tenant's store as `AsyncTenants.for_tenant` gives it: each call runs on the
    tenant's open store, taken for the call (`async_tenants.py`)."""

    def __init__(self, tenants: AsyncTenants, place: TenantPlace, generation: int) -> None:
        # Not the store's own __init__: this holds no backend, only where to take one.
        self._tenants = tenants
        self._at = place
        self._generation = generation
        self._closed = False
        self._own_retention: Retention | None = None
        self._own_keys: KeyStore | None = None
        self.url = place.url
        self.tenant = self._tenant_id = place.tenant
        self.max_event_bytes = tenants.max_event_bytes

    async def _take(self) -> AsyncEventStore:
        if self._closed:
            raise StoreUnavailable(STORE_CLOSED)
        return await self._tenants._take(self._at, self._generation)

    if True:  # ASYNC

        async def _read(
            self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
        ) -> AsyncIterator[Any]:
            store = await self._take()
            try:
                async for item in getattr(store, name)(*args, **kwargs):
                    yield item
            finally:
                await self._tenants._give_back(self._tenant_id)

    else:

        def _read(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Iterator[Any]:
            store = self._take()
            try:
                yield from getattr(store, name)(*args, **kwargs)
            finally:
                self._tenants._give_back(self._tenant_id)

    append = _leased(AsyncEventStore.append)
    append_many = _leased(AsyncEventStore.append_many)
    read_stream = _leased_read(AsyncEventStore.read_stream)
    read_stream_encoded = _leased_read(AsyncEventStore.read_stream_encoded)
    read_all = _leased_read(AsyncEventStore.read_all)
    count_events = _leased(AsyncEventStore.count_events)
    count_types = _leased(AsyncEventStore.count_types)
    read_query = _leased(AsyncEventStore.read_query)
    read_all_encoded = _leased_read(AsyncEventStore.read_all_encoded)
    read_all_json = _leased_read(AsyncEventStore.read_all_json)
    open_events = _leased_read(AsyncEventStore.open_events)
    if True:  # ASYNC
        subscribe = _leased_read(AsyncEventStore.subscribe)
    high_water_mark = _leased(AsyncEventStore.high_water_mark)
    read_event = _leased(AsyncEventStore.read_event)
    now = _leased(AsyncEventStore.now)
    log_status = _leased(AsyncEventStore.log_status)
    wait_for_events = _leased(AsyncEventStore.wait_for_events)
    stream_version = _leased(AsyncEventStore.stream_version)
    list_streams = _leased_read(AsyncEventStore.list_streams)
    save_snapshot = _leased(AsyncEventStore.save_snapshot)
    load_snapshot = _leased(AsyncEventStore.load_snapshot)
    delete_stream = _leased(AsyncEventStore.delete_stream)
    stream_deletion = _leased(AsyncEventStore.stream_deletion)
    placed_deletions = _leased(AsyncEventStore.placed_deletions)
    low_water_mark = _leased(AsyncEventStore.low_water_mark)
    forget = _leased(AsyncEventStore.forget)

    @property
    def retention(self) -> Retention:
        """The tenant store's retention, with connections of its own (released when this
        store is closed), for retention runs. Its calls block: run them in a thread."""
        if self._closed:
            raise StoreUnavailable(STORE_CLOSED)
        if self._own_retention is None:
            self._own_retention = self._tenants._own(retention_for(self.url))
        return self._own_retention

    @property
    def keys(self) -> KeyStore:
        """The tenant's key store, with connections of its own (released when this store is
        closed). Its calls block: run them in a thread."""
        if self._closed:
            raise StoreUnavailable(STORE_CLOSED)
        if self._at.kind == "memory":  # in the tenant's store: memory is seen by it alone
            return self._tenants._kept(self._at, self._generation).keys
        if self._own_keys is None:
            self._own_keys = self._tenants._own(KeyStore.open(_keys_url(self._at) or self.url))
        return self._own_keys

    def for_tenant(self, tenant: str) -> AsyncEventStore:
        raise InvalidTenant(
            f"this is the store of tenant {self.tenant!r} already: a tenant's store has no tenants"
        )

    async def drop_tenant(self) -> TenantDrop:
        """Remove everything of this tenant (see `AsyncEventStore.drop_tenant`), once no
        call uses its store; this store is closed, and every other store given for the
        tenant before raises `StoreUnavailable` from now on."""
        if self._closed:
            raise StoreUnavailable(STORE_CLOSED)
        dropped = await self._tenants._drop(self._at, self._generation)
        await self.close()
        return dropped

    async def close(self) -> None:
        """Close this store (its calls raise `StoreUnavailable` from now on); the tenant's
        open store stays, for the other stores given for it. Idempotent."""
        self._closed = True
        retention, self._own_retention = self._own_retention, None
        keys, self._own_keys = self._own_keys, None
        for closing in (retention, keys):
            if closing is not None:
                self._tenants._disown(closing)
                closing.close()

    def __repr__(self) -> str:
        return f"{self._tenants!r}.for_tenant({self._tenant_id!r})"
