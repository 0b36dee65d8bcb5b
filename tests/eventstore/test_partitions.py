"""A PostgreSQL store whose events table is partitioned by position (`?partition_events=`,
`eventstore/postgres/partitions.py`): partitions made ahead of appends racing across
their bounds in real processes, and the promises the unique indexes of an unpartitioned
store keep (a version once, an id once) kept across partitions. The shipped conformance
suite runs on such a store too (`test_conformance.py`, `postgres-partitioned`)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from urllib.parse import parse_qs, urlsplit

import psycopg
import pytest
from eventcraft.eventstore import (
    DuplicateEventId,
    EventStore,
    NewEvent,
    PostgresTarget,
    StorePermissionDenied,
    UnsupportedStoreURL,
)
from eventcraft.eventstore.postgres import append_functions, partitions

from ..conftest import PG_URL
from ..processes import PROCESSES
from ..roles import roles_sql, store_roles
from . import partition_workers, workers
from .tailing import tail_until_written

SIZE = 10


@pytest.fixture
def url(pg_url: str) -> str:
    return f"{pg_url}&partition_events={SIZE}"


@pytest.fixture(params=["sync", "async"])
def api(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _schema(url: str) -> str:
    return parse_qs(urlsplit(url).query)["schema"][0]


@pytest.fixture
def catalog() -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        yield conn


def _partitions(conn: psycopg.Connection[tuple[object, ...]], url: str) -> list[str]:
    """The events table's partitions' bounds, in order of their lower bound."""
    rows = conn.execute(
        "SELECT pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i "
        "JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = %s::regclass",
        (f"{_schema(url)}.eventcraft_events",),
    ).fetchall()
    bounds = [str(row[0]) for row in rows]
    return sorted(bounds, key=lambda b: int(b.split("'")[1]))


def test_a_new_store_with_partition_events_is_partitioned_with_a_spare_ahead(
    url: str, catalog: psycopg.Connection[tuple[object, ...]]
) -> None:
    with EventStore.open(url) as store:
        assert len(_partitions(catalog, url)) == 2  # [0, 10) and the spare
        store.append("order-1", [NewEvent("Placed", {"i": i}) for i in range(25)])
        assert [e.position for e in store.read_all()] == list(range(1, 26))
        assert store.stream_version("order-1") == 25
    # Positions up to 25: [20, 30) is the last in use, [30, 40) the spare.
    assert _partitions(catalog, url) == [
        f"FOR VALUES FROM ('{low}') TO ('{low + SIZE}')" for low in range(0, 40, SIZE)
    ]


def test_a_partitioned_store_stays_partitioned_and_an_old_one_stays_as_it_is(
    pg_url: str, url: str, catalog: psycopg.Connection[tuple[object, ...]]
) -> None:
    EventStore.open(pg_url).close()  # made without the option
    with EventStore.open(url) as store:  # the option counts only for a new store
        store.append("order-1", [NewEvent("Placed", {})])
    assert _partitions(catalog, url) == []
    other = url.replace(_schema(url), f"{_schema(url)}_p")
    try:
        EventStore.open(other).close()
        with EventStore.open(other.replace(f"&partition_events={SIZE}", "")) as store:
            store.append("order-1", [NewEvent("Placed", {"i": i}) for i in range(12)])
            assert store.stream_version("order-1") == 12
        assert len(_partitions(catalog, other)) == 3
    finally:
        catalog.execute(f"DROP SCHEMA IF EXISTS {_schema(other)} CASCADE")


@pytest.mark.parametrize("given", ["9", "0", "-10", "ten", "1.5", str((1 << 40) + 1)])
def test_a_partition_size_out_of_range_is_refused_naming_the_option(given: str) -> None:
    with pytest.raises(UnsupportedStoreURL, match=f"partition_events .* not '{given}'"):
        PostgresTarget.from_url(f"postgresql://app@db/shop?partition_events={given}")


@pytest.mark.slow
def test_appenders_in_processes_crossing_partition_bounds_never_miss_a_partition(
    url: str, api: str, catalog: psycopg.Connection[tuple[object, ...]]
) -> None:
    """Four processes append batches of 1 to 25 events at once, in a store of partitions
    of 10: every append succeeds, and a reader tailing the log meanwhile sees every
    event once, in order (the global-log rule across partitions)."""
    writers, appends = 4, 40
    EventStore.open(url).close()
    with (
        workers.opened(url, api) as store,
        PROCESSES.Manager() as manager,
        ProcessPoolExecutor(writers, mp_context=PROCESSES) as pool,
    ):
        barrier = manager.Barrier(writers)
        futures = [
            pool.submit(partition_workers.cross_bounds, url, w, appends, barrier, api)
            for w in range(writers)
        ]
        tail_until_written(store, futures)
        events = list(store.read_all())
        for w in range(writers):
            versions = [e.version for e in store.read_stream(f"own-{w}")]
            assert versions == list(range(1, len(versions) + 1))
    made = {int(bound.split("'")[1]) // SIZE for bound in _partitions(catalog, url)}
    # The spare after the head is made. (A range whose positions only appends rolled
    # back drew, a race lost at ANY, may have none: its partition went with them.)
    assert events[-1].position // SIZE + 1 in made


@pytest.mark.parametrize(("size", "rounds"), [(1, 12), (7, 8)], ids=["one", "crossing"])
@pytest.mark.slow
def test_racing_writers_in_processes_at_one_version_have_one_winner_across_partitions(
    url: str, api: str, size: int, rounds: int
) -> None:
    """The version is unique in the key table, not in a partition: a round's winner's
    events and a loser's would lie in different partitions (batches of 7 in partitions
    of 10), and still only one is stored."""
    processes = 4
    EventStore.open(url).close()
    with (
        PROCESSES.Manager() as manager,
        ProcessPoolExecutor(processes, mp_context=PROCESSES) as pool,
    ):
        barrier = manager.Barrier(processes)
        futures = [
            pool.submit(workers.race, url, "raced-1", rounds, barrier, size, api)
            for _ in range(processes)
        ]
        outcomes = [future.result(timeout=120) for future in futures]
    assert [sum(o[r] for o in outcomes) for r in range(rounds)] == [1] * rounds
    with EventStore.open(url) as store:
        stored = list(store.read_stream("raced-1"))
        assert [e.version for e in stored] == list(range(1, rounds * size + 1))
        assert store.stream_version("raced-1") == rounds * size


def test_the_same_append_sent_by_processes_at_once_is_stored_once(url: str, api: str) -> None:
    """Six processes send one append (the same ids) at once, as retries racing each
    other would, into a store whose head is partitions past the first: each is answered
    with the one stored append's result."""
    with EventStore.open(url) as store:
        store.append("filler-1", [NewEvent("Filled", {"i": i}) for i in range(23)])
    ids = [str(uuid.uuid4()) for _ in range(12)]  # 12 events: across a partition's bound
    processes = 6
    with (
        PROCESSES.Manager() as manager,
        ProcessPoolExecutor(processes, mp_context=PROCESSES) as pool,
    ):
        barrier = manager.Barrier(processes)
        futures = [
            pool.submit(partition_workers.same_ids, url, "order-9", ids, barrier, api)
            for _ in range(processes)
        ]
        results = {future.result(timeout=120) for future in futures}
    assert len(results) == 1
    with EventStore.open(url) as store:
        assert [str(e.id) for e in store.read_stream("order-9")] == ids
        assert sum(1 for _ in store.read_all()) == 23 + 12


def test_an_id_stored_in_an_older_partition_is_recognised(url: str) -> None:
    """Idempotency by event id across partitions: a retry of an append whose events lie
    partitions below the head returns its result and writes nothing; the same ids in
    another stream are refused."""
    first = [NewEvent("Placed", {"n": n}) for n in range(3)]
    with EventStore.open(url) as store:
        original = store.append("order-1", first)
        for n in range(5):
            store.append(f"filler-{n}", [NewEvent("Filled", {"i": i}) for i in range(9)])
        assert original.positions[-1] < 10 < 40 < store.high_water_mark()
        assert store.read_event(first[0].id) is not None  # found in [0, 10)
        again = store.append("order-1", first)
        assert again == original
        with pytest.raises(DuplicateEventId):
            store.append("order-2", first)
        assert store.stream_version("order-1") == 3
        assert sum(1 for _ in store.read_all()) == 3 + 5 * 9


@pytest.mark.parametrize(
    "part", ["_INSERT_HEAD", "_VERSION_CHECK", "_DRAW_POSITIONS", "_EVENT_ROWS", "_INSERT_TAIL"]
)
def test_a_change_to_the_append_reaches_the_partitioned_stores_function(
    part: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The partitioned store's `eventcraft_insert_events` is made of the parts the plain
    store's is made of, its key step added: a line added to any part is in both."""
    marker = f"    -- changed: {part}\n"
    monkeypatch.setattr(append_functions, part, getattr(append_functions, part) + marker)
    plain = append_functions.insert_events()
    (partitioned,) = [f for f in partitions.functions(SIZE) if "eventcraft_insert_events(" in f]
    assert marker in plain and marker in partitioned
    # Nothing else differs: the key table for versions, and the step before the rows.
    assert partitioned.replace(partitions.KEY_STEP, "") == append_functions.insert_events(
        versions=partitions.KEYS, step=""
    )
    assert partitions.KEY_STEP in partitioned


def test_a_partitioned_store_holds_the_function_its_parts_make(
    url: str, catalog: psycopg.Connection[tuple[object, ...]]
) -> None:
    EventStore.open(url).close()
    row = catalog.execute(
        "SELECT prosrc FROM pg_proc WHERE proname = 'eventcraft_insert_events' "
        "AND pronamespace = %s::regnamespace",
        (_schema(url),),
    ).fetchone()
    assert row is not None
    assert f"AS $${row[0]}$$" in partitions.insert_events()


def test_the_roles_script_grants_a_partitioned_stores_writer_its_keys_and_a_lack_is_named(
    pg_url: str,
) -> None:
    """`examples/postgres_roles.sql` on a partitioned store: the application's role appends
    (INSERT on the key table, granted where the table is); without that grant its append
    is refused naming it, as any privilege an append lacks is."""
    schema = _schema(pg_url)
    with store_roles(schema, granted=False) as roles:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            for statement in roles_sql(roles, 1):
                conn.execute(statement.encode())
            EventStore.open(f"{roles.url(roles.migrator)}&partition_events={SIZE}").close()
            for statement in roles_sql(roles, 2):
                conn.execute(statement.encode())
        with EventStore.open(roles.url(roles.writer)) as store:
            store.append("order-1", [NewEvent("Placed", {"i": i}) for i in range(12)])
            assert store.stream_version("order-1") == 12
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'REVOKE INSERT ON {schema}.eventcraft_event_keys FROM "{roles.writer}"')
        with EventStore.open(roles.url(roles.writer)) as store:
            with pytest.raises(StorePermissionDenied) as refused:
                store.append("order-2", [NewEvent("Placed", {})])
            assert store.high_water_mark() == 12
    assert f"lacks INSERT on table {schema}.eventcraft_event_keys" in str(refused.value)
    assert "an append needs it" in str(refused.value)
