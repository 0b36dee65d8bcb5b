"""A PostgreSQL store behind PgBouncer (`tests/pgbouncer.py`): what goes through the
pooler, what takes the direct connection, and what is refused, saying why."""

from __future__ import annotations

import asyncio
import threading
import uuid
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC

import psycopg
import pytest
from eventcraft.eventstore import (
    AsyncEventStore,
    EventStore,
    NewEvent,
    StoreUnavailable,
    UnsupportedStoreURL,
)
from eventcraft.eventstore.postgres.key_table import PostgresKeyTable
from eventcraft.eventstore.postgres.retention import PostgresRetention

from tests.conftest import PG_URL
from tests.pgbouncer import PgBouncer, direct_url
from tests.processes import PROCESSES

from . import workers
from .tailing import tail_until_written

pytestmark = pytest.mark.postgres


def _schema(url: str) -> str:
    return url.split("schema=", 1)[1].split("&", 1)[0]


def _in_schema(schema: str) -> set[str]:
    """The store's tables PostgreSQL holds in `schema`."""
    with psycopg.connect(PG_URL) as conn:
        rows = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s AND tablename LIKE %s",
            (schema, "eventcraft_%"),
        ).fetchall()
    return {row[0] for row in rows}


def test_a_store_with_a_schema_opens_through_pgbouncer_in_transaction_pooling(
    pgbouncer: PgBouncer, pg_url: str
) -> None:
    # Before: FATAL: unsupported startup parameter: options, whatever the URL said.
    url = f"{pgbouncer.url()}?schema={_schema(pg_url)}&pooler=transaction"
    with EventStore.open(url) as store:
        for n in range(12):  # more than psycopg's 5 before it prepares a statement
            store.append(f"order-{n % 3}", [NewEvent("OrderPlaced", {"n": n})])
            assert store.stream_version(f"order-{n % 3}") == n // 3 + 1
        events = list(store.read_all())
    assert [event.data["n"] for event in events] == list(range(12))
    assert events[0].recorded_at.utcoffset() == UTC.utcoffset(None)
    assert "eventcraft_events" in _in_schema(_schema(pg_url))  # never the pooler's default


def test_through_a_transaction_pooler_the_schema_holds_for_every_pooled_connection(
    pgbouncer: PgBouncer, pg_url: str
) -> None:
    # Threads at once take several of PgBouncer's server connections, none of which is
    # the store's session: each transaction must set the schema for itself.
    url = f"{pgbouncer.url()}?schema={_schema(pg_url)}&pooler=transaction"
    with EventStore.open(url) as store:
        failures: list[BaseException] = []

        def work(worker: int) -> None:
            try:
                for n in range(20):
                    store.append(f"w{worker}", [NewEvent("Tick", {"n": n})])
                    assert len(list(store.read_stream(f"w{worker}"))) == n + 1
            except BaseException as error:
                failures.append(error)

        threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert failures == []
        assert store.high_water_mark() == 80


@pytest.mark.parametrize("api", ["sync", "async"])
@pytest.mark.slow
def test_a_reader_tailing_through_pgbouncer_sees_every_event_writer_processes_commit(
    pgbouncer_url: str, api: str
) -> None:
    # The log's ordering rule (the high-water mark) read through pooled connections, each
    # statement maybe on another server session, while real processes append at once.
    writers, appends = 4, 100
    with (
        workers.opened(pgbouncer_url, api) as store,
        ProcessPoolExecutor(writers, mp_context=PROCESSES) as pool,
    ):
        futures = [
            pool.submit(workers.write_mix, pgbouncer_url, w, appends, seed=w, api=api)
            for w in range(writers)
        ]
        tail_until_written(store, futures)


def test_an_async_store_appends_alone_grouped_and_in_parts_through_pgbouncer(
    pgbouncer_url: str,
) -> None:
    async def run() -> list[int]:
        async with await AsyncEventStore.open(pgbouncer_url) as store:
            await store.append("big", [NewEvent("Line", {"n": n}) for n in range(600)])
            await asyncio.gather(
                *(store.append(f"o-{n}", [NewEvent("Placed", {"n": n})]) for n in range(40))
            )
            return [await store.stream_version(s) for s in ("big", "o-0", "o-39")]

    assert asyncio.run(run()) == [600, 1, 1]


def test_without_pooler_the_refusal_names_the_url_option(pgbouncer: PgBouncer, pg_url: str) -> None:
    url = f"{pgbouncer.url(mode='session')}?schema={_schema(pg_url)}"
    with pytest.raises(StoreUnavailable) as refused:
        EventStore.open(url)
    assert "unsupported startup parameter: options" in str(refused.value)
    assert "pooler=transaction" in str(refused.value)


def test_a_store_opens_through_pgbouncer_in_session_pooling_and_listens_there(
    pgbouncer: PgBouncer, pg_url: str
) -> None:
    url = f"{pgbouncer.url(mode='session')}?schema={_schema(pg_url)}&pooler=session"
    with EventStore.open(url) as store, EventStore.open(url) as other:
        woke = threading.Event()

        def wait() -> None:
            if store.wait_for_events(0, 30):
                woke.set()

        waiter = threading.Thread(target=wait)
        waiter.start()
        other.append("order-1", [NewEvent("OrderPlaced", {})])
        waiter.join(30)
        assert woke.is_set()
    assert "eventcraft_events" in _in_schema(_schema(pg_url))


def test_behind_a_transaction_pooler_the_listener_takes_the_direct_connection(
    pgbouncer: PgBouncer, pg_url: str
) -> None:
    name = f"eventcraft-direct-{uuid.uuid4().hex[:8]}"
    url = (
        f"{pgbouncer.url()}?schema={_schema(pg_url)}&pooler=transaction"
        f"&direct={direct_url()}?application_name={name}"
    )
    with EventStore.open(url) as store:
        woke = threading.Event()

        def wait() -> None:
            if store.wait_for_events(0, 30):
                woke.set()

        waiter = threading.Thread(target=wait)
        waiter.start()
        store.append("order-1", [NewEvent("OrderPlaced", {})])
        waiter.join(30)
        assert woke.is_set()
        with psycopg.connect(PG_URL) as conn:
            listening = conn.execute(
                "SELECT query FROM pg_stat_activity WHERE application_name = %s", (name,)
            ).fetchall()
    assert listening == [("LISTEN eventcraft_events",)]


def test_behind_a_transaction_pooler_without_direct_a_waiter_still_wakes(
    pgbouncer: PgBouncer, pg_url: str
) -> None:
    # Nobody listens (LISTEN needs a session): the waiter looks every RECHECK instead.
    url = f"{pgbouncer.url()}?schema={_schema(pg_url)}&pooler=transaction"
    with EventStore.open(url) as store:
        woke = threading.Event()

        def wait() -> None:
            if store.wait_for_events(0, 30):
                woke.set()

        waiter = threading.Thread(target=wait)
        waiter.start()
        store.append("order-1", [NewEvent("OrderPlaced", {})])
        waiter.join(30)
        assert woke.is_set()


def test_retention_behind_a_transaction_pooler_asks_for_the_direct_connection(
    pgbouncer: PgBouncer, pg_url: str
) -> None:
    url = f"{pgbouncer.url()}?schema={_schema(pg_url)}&pooler=transaction"
    EventStore.open(url).close()
    retention = PostgresRetention(url)
    try:
        with (
            pytest.raises(UnsupportedStoreURL, match="direct=postgresql://"),
            retention.exclusive(),
        ):
            pass
    finally:
        retention.close()
    retention = PostgresRetention(f"{url}&direct={direct_url()}")
    try:
        with retention.exclusive():  # held by a session of its own, on PostgreSQL itself
            pass
    finally:
        retention.close()


def test_a_forget_behind_a_transaction_pooler_asks_for_the_direct_connection(
    pgbouncer: PgBouncer, pg_url: str
) -> None:
    # VACUUM FULL runs outside any transaction: only a session of its own can run it.
    url = f"{pgbouncer.url()}?schema={_schema(pg_url)}&pooler=transaction"
    EventStore.open(url).close()
    keys = PostgresKeyTable(url)
    try:
        assert list(keys.live_keys(["c1"])) == ["c1"]  # sealing goes through the pooler
        with pytest.raises(UnsupportedStoreURL, match="forgetting personal data"):
            keys.forget("c1")
    finally:
        keys.close()
    # Its rewrite waits for older transactions, which other tests on the shared server may
    # hold: the erasure, not the rewrite, is what this test looks at.
    keys = PostgresKeyTable(f"{url}&direct={direct_url()}", snapshot_wait=0.1)
    try:
        assert keys.forget("c1") == 1
        forgotten = keys.of_subject("c1")
        assert forgotten and all(key.material is None for key in forgotten)
    finally:
        keys.close()


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("pooler=statement", "pooler must be one of session, transaction"),
        ("direct=postgresql://db:5432/shop", "it goes with pooler=transaction"),
        ("pooler=session&direct=postgresql://db:5432/shop", "it goes with pooler=transaction"),
        ("pooler=transaction&direct=db:5432", "direct= is a URL to PostgreSQL itself"),
        (
            "pooler=transaction&direct=postgresql://db:5432/shop?schema=x",
            "schema goes on the store's URL",
        ),
    ],
)
def test_a_pooler_option_that_cannot_work_is_refused_before_connecting(
    query: str, says: str
) -> None:
    with pytest.raises(UnsupportedStoreURL, match=says):
        EventStore.open(f"postgresql://app@pgbouncer.invalid:6432/shop?{query}")
