"""The PostgreSQL store's pool is bounded: many threads share a few connections, a role
capped at 20 connections serves 100 threads, and a caller that cannot get a connection
in time is told why."""

from __future__ import annotations

import asyncio
import contextlib
import select
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from eventcraft.eventstore import (
    AsyncEventStore,
    EventStore,
    NewEvent,
    PoolExhausted,
    UnsupportedStoreURL,
    WrongExpectedVersion,
)
from eventcraft.eventstore.postgres.async_connections import AsyncConnectionPool
from eventcraft.eventstore.postgres.connections import (
    POOL_SIZE,
    ConnectionPool,
    PostgresTarget,
)

from ..conftest import PG_URL
from ..waiting import until

ROLE = "eventcraft_capped"
ROLE_LIMIT = 20


@pytest.fixture
def capped_url(pg_url: str) -> Iterator[str]:
    """A store URL whose role may hold at most `ROLE_LIMIT` connections."""
    schema = f"capped_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (ROLE,)).fetchone() is None:
            conn.execute(f"CREATE ROLE {ROLE} LOGIN CONNECTION LIMIT {ROLE_LIMIT}")
        conn.execute(f"ALTER ROLE {ROLE} CONNECTION LIMIT {ROLE_LIMIT}")
        database = conn.info.dbname
        conn.execute(f"GRANT CREATE ON DATABASE {database} TO {ROLE}")  # the store's IF NOT EXISTS
        conn.execute(f"CREATE SCHEMA {schema} AUTHORIZATION {ROLE}")
    host = PG_URL.split("@", 1)[1]
    yield f"postgresql://{ROLE}@{host}?schema={schema}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def test_a_hundred_threads_share_a_role_capped_at_twenty_connections(capped_url: str) -> None:
    """Each thread loads a stream and appends at its version, retrying when another
    thread got there first: what an application saving aggregates does. With a
    connection per concurrent caller, most of these threads were refused by the server
    (`too many connections for role`)."""
    threads, streams = 100, 10
    failures: list[BaseException] = []
    start = threading.Barrier(threads)

    with EventStore.open(capped_url) as store:

        def save(n: int) -> None:
            stream = f"counter-{n % streams}"
            try:
                start.wait()
                while True:
                    version = len(list(store.read_stream(stream)))  # the aggregate's load
                    try:
                        store.append(stream, [NewEvent("Counted", {"by": n})], version)
                        return
                    except WrongExpectedVersion:
                        continue
            except BaseException as error:
                failures.append(error)

        workers = [threading.Thread(target=save, args=(n,)) for n in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert failures == []
        counted = sorted(e.data["by"] for e in store.read_all())
        assert counted == list(range(threads))
        for s in range(streams):
            assert store.stream_version(f"counter-{s}") == threads // streams


def test_a_caller_waits_for_a_connection_then_is_told_the_pools_size(pg_url: str) -> None:
    pool = ConnectionPool(PostgresTarget.from_url(f"{pg_url}&pool_size=1&pool_timeout=0.2"))
    try:
        # Holding the only connection, ask for another: the second caller waits, then gives up.
        with pytest.raises(PoolExhausted, match="all 1 connections") as raised:
            pool.run(lambda conn: pool.run(lambda other: None))
        assert (raised.value.size, raised.value.timeout) == (1, 0.2)
        assert pool.run(lambda conn: conn.execute("SELECT 1").fetchone()) == (1,)
    finally:
        pool.close()


def test_the_pool_size_comes_from_the_url_or_the_default(pg_url: str) -> None:
    assert PostgresTarget.from_url(pg_url).pool_size == POOL_SIZE
    target = PostgresTarget.from_url(f"{pg_url}&pool_size=3&pool_timeout=2.5")
    assert (target.pool_size, target.pool_timeout) == (3, 2.5)
    assert "pool_size" not in target.conninfo  # libpq would refuse it


@pytest.mark.parametrize(
    ("setting", "named"),
    [
        ("pool_size=0", "pool_size"),
        ("pool_size=many", "pool_size"),
        ("pool_timeout=-1", "pool_timeout"),
    ],
)
def test_a_bad_pool_setting_is_refused_by_name(pg_url: str, setting: str, named: str) -> None:
    with pytest.raises(UnsupportedStoreURL, match=named):
        EventStore.open(f"{pg_url}&{setting}")


@pytest.mark.parametrize(
    ("url", "named"),
    [
        (
            "postgresql://postgres@127.0.0.1:5432/test?bogus=1",
            'invalid URI query parameter: "bogus"',
        ),
        ("postgresql://postgres@127.0.0.1:99999/test", "not '99999'"),
    ],
)
def test_what_libpq_would_refuse_is_an_input_error_before_connecting(url: str, named: str) -> None:
    """Not `StoreUnavailable` ("cannot be reached"), as the driver's refusal read before."""
    with pytest.raises(UnsupportedStoreURL, match=named):
        EventStore.open(url)


@pytest.mark.parametrize("api", ["sync", "async"])
def test_a_pool_busy_at_its_full_size_keeps_its_connections(pg_url: str, api: str) -> None:
    """Rounds of 12 callers holding a connection at once, on a pool of 12: the first round
    opens 12 connections and the later ones reuse them. The sync pool kept 8 and opened
    the rest again each round: 128 new server processes in 1,500 decisions of 16 writers
    (the conditional-append benchmark), each filling its caches and plans again."""
    size, rounds = 12, 3
    target = PostgresTarget.from_url(f"{pg_url}&pool_size={size}")
    backends: list[set[int]] = []
    if api == "sync":
        pool = ConnectionPool(target)
        start = threading.Barrier(size)

        def hold(conn: psycopg.Connection[tuple[object, ...]]) -> int:
            start.wait(timeout=30)  # all lent at once
            return conn.info.backend_pid

        try:
            for _ in range(rounds):
                found: list[int] = []
                callers = [
                    threading.Thread(target=lambda into=found: into.append(pool.run(hold)))
                    for _ in range(size)
                ]
                for caller in callers:
                    caller.start()
                for caller in callers:
                    caller.join()
                backends.append(set(found))
        finally:
            pool.close()
    else:

        async def rounds_of_tasks() -> None:
            pool = AsyncConnectionPool(target)
            start = asyncio.Barrier(size)

            async def hold(conn: psycopg.AsyncConnection[Any]) -> int:
                await start.wait()
                return conn.info.backend_pid

            try:
                for _ in range(rounds):
                    found = await asyncio.gather(*(pool.run(hold) for _ in range(size)))
                    backends.append(set(found))
            finally:
                await pool.close()

        asyncio.run(rounds_of_tasks())
    assert [len(pids) for pids in backends] == [size] * rounds
    assert backends[1] == backends[0] and backends[2] == backends[0]


def _ended_by_the_server(idle: list[Any]) -> None:
    """End the server processes of the `idle` connections, as a restart or
    `idle_session_timeout` does, and return once each connection has the goodbye at hand."""
    pids = [conn.info.backend_pid for conn in idle]
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        for pid in pids:
            conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
    # A process leaves pg_stat_activity before its socket closes: wait for the goodbye
    # itself on each connection's socket, which is what the pool looks for.
    deadline = time.monotonic() + 30
    for conn in idle:
        while not select.select([conn.pgconn.socket], [], [], 0.05)[0]:
            if time.monotonic() > deadline:
                raise AssertionError(f"server processes {pids} said no goodbye")


@pytest.mark.parametrize("api", ["sync", "async"])
def test_idle_connections_the_server_ended_are_never_lent_to_an_append(
    pg_url: str, api: str
) -> None:
    """The async pool lent a connection whose last use was an append (its NOTIFY's reply
    unread, in pipeline mode) unchecked: the next appends went into dead sockets and ended
    as `AppendOutcomeUnknown`, though nothing had reached the server. The sync pool read
    the reply, but lent the connection without looking for the goodbye behind it: with
    two such connections idle, an append and its retry both went into dead sockets."""
    url = f"{pg_url}&pool_size=4"
    if api == "sync":
        with EventStore.open(url, group_commit=False) as store:
            start = threading.Barrier(2)

            def warm(n: int) -> None:
                start.wait(timeout=30)
                for _ in range(25):  # two appends at once: a connection each
                    store.append(f"warm-{n}", [NewEvent("E", {})])

            warmers = [threading.Thread(target=warm, args=(n,)) for n in range(2)]
            for warmer in warmers:
                warmer.start()
            for warmer in warmers:
                warmer.join()
            idle = list(store._backend._pool._idle)  # type: ignore[attr-defined]
            assert len(idle) >= 2, "each warmed connection's last use was an append"
            _ended_by_the_server(idle)
            results = [store.append(f"after-{n}", [NewEvent("E", {})]) for n in range(3)]
            assert [r.positions for r in results] == [(51,), (52,), (53,)]
        return

    async def appends_after_the_server_ended_the_idle_ones() -> None:
        async with await AsyncEventStore.open(url) as store:
            await asyncio.gather(
                *(store.append(f"warm-{n}", [NewEvent("E", {})]) for n in range(8))
            )
            # The NOTIFY after the appends is sent by a task of the store's, on a pooled
            # connection: once it is done, every connection is idle, and stays so.
            announcer = store._backend._appends._announcer  # type: ignore[attr-defined]
            deadline = time.monotonic() + 30
            while announcer is not None and not announcer.done():
                assert time.monotonic() < deadline, "the NOTIFY was never sent"
                await asyncio.sleep(0.01)
            idle = list(store._backend._pool._idle)  # type: ignore[attr-defined]
            assert idle, "the appends gave their connections back"
            _ended_by_the_server(idle)
            results = [await store.append(f"after-{n}", [NewEvent("E", {})]) for n in range(3)]
            assert [r.positions for r in results] == [(9,), (10,), (11,)]

    asyncio.run(appends_after_the_server_ended_the_idle_ones())


def test_an_append_queued_behind_a_group_waiting_for_the_pool_waits_at_most_its_timeout(
    pg_url: str,
) -> None:
    """The second caller queues behind the first one's group, which waits for the only
    connection; once that group gives up, the second leads and must not start a full wait
    of its own: each caller waits at most `pool_timeout` from its call."""
    timeout = 1.0
    with EventStore.open(f"{pg_url}&pool_size=1&pool_timeout={timeout}") as store:
        store.append("account-0", [NewEvent("Opened", {})])  # the schema, made before the wait
        backend: Any = store._backend
        pool, groups = backend._pool, backend._appends._groups
        holding, release = threading.Event(), threading.Event()

        def hold(conn: psycopg.Connection[Any]) -> None:
            holding.set()
            release.wait(30)

        holder = threading.Thread(target=pool.run, args=(hold,))
        holder.start()
        assert holding.wait(30)
        waited: dict[str, float] = {}

        def append(name: str) -> None:
            began = time.monotonic()
            with contextlib.suppress(PoolExhausted):
                store.append(f"account-{name}", [NewEvent("Opened", {})])
            waited[name] = time.monotonic() - began

        first = threading.Thread(target=append, args=("first",))
        first.start()
        until(lambda: groups._leaders == 1)  # the first leads, waiting for the connection
        second = threading.Thread(target=append, args=("second",))
        second.start()
        until(lambda: groups.waiting == 1)  # the second is queued behind that group
        first.join()
        second.join()
        release.set()
        holder.join()
    assert waited["first"] >= timeout
    assert waited["second"] < timeout * 1.5  # it would be about twice the timeout


def test_an_async_append_queued_behind_a_group_waiting_for_the_pool_waits_at_most_its_timeout(
    pg_url: str,
) -> None:
    """As above, for the async store: the third append queues behind the group a sender
    waits with (the first went from its own task), and may not wait twice."""
    timeout = 1.0

    async def scenario() -> dict[str, float]:
        url = f"{pg_url}&pool_size=1&pool_timeout={timeout}"
        async with await AsyncEventStore.open(url) as store:
            await store.append("account-0", [NewEvent("Opened", {})])
            backend: Any = store._backend
            pool, queue = backend._pool, backend._appends._queue
            holding, release = asyncio.Event(), asyncio.Event()

            async def hold(conn: psycopg.AsyncConnection[Any]) -> None:
                holding.set()
                await release.wait()

            holder = asyncio.create_task(pool.run(hold))
            await holding.wait()
            waited: dict[str, float] = {}

            async def append(name: str) -> None:
                began = time.monotonic()
                with contextlib.suppress(PoolExhausted):
                    await store.append(f"account-{name}", [NewEvent("Opened", {})])
                waited[name] = time.monotonic() - began

            async def until(condition: Callable[[], bool]) -> None:
                deadline = time.monotonic() + 30
                while not condition():
                    assert time.monotonic() < deadline, "the condition never held"
                    await asyncio.sleep(0.001)

            tasks = [asyncio.create_task(append("inline"))]
            await until(lambda: queue._inline == 1)
            tasks.append(asyncio.create_task(append("sent")))
            await until(lambda: len(queue._senders) == 1 and not queue._queued)
            tasks.append(asyncio.create_task(append("queued")))
            await until(lambda: len(queue._queued) == 1)
            await asyncio.gather(*tasks)
            release.set()
            await holder
            return waited

    waited = asyncio.run(scenario())
    assert waited["sent"] >= timeout * 0.9
    assert waited["queued"] < timeout * 1.5  # it would be about twice the timeout
