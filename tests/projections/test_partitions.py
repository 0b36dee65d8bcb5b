"""Competing consumers: processes share a subscription's partitions, take over a dead
one's, and keep each stream's events in order."""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.context import ForkServerProcess
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from eventcraft.eventstore import EventStore, NewEvent, RecordedEvent
from eventcraft.projections import (
    Database,
    DefinitionError,
    Partition,
    PartitionedRunner,
    PartitionSubscription,
    Subscription,
    parking,
    partition_of,
)
from eventcraft.projections import checkpoint as checkpoints
from eventcraft.projections.competing import members
from eventcraft.projections.database import engine_for

from ..processes import PROCESSES
from . import models
from .partition_workers import handle_partitions, project_partitions


def handled(paths: list[Path]) -> list[tuple[int, str, int]]:
    lines = []
    for path in paths:
        if path.exists():
            for line in path.read_text().splitlines():
                stamp, stream, version = line.split()
                lines.append((int(stamp), stream, int(version)))
    return sorted(lines)


def wait_for(condition: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


@contextmanager
def two_handlers(
    pg_url: str, folder: Path, partitions: int, pause: float
) -> Iterator[tuple[list[ForkServerProcess], list[Path]]]:
    """Two processes handling the partitions of the same subscription, each writing what it
    handled to a log of its own, started together; killed afterwards if still running."""
    logs = [folder / "a.log", folder / "b.log"]
    barrier = PROCESSES.Barrier(3)
    workers = [
        PROCESSES.Process(
            target=handle_partitions, args=(pg_url, str(path), partitions, pause, barrier)
        )
        for path in logs
    ]
    for worker in workers:
        worker.start()
    try:
        barrier.wait(60)
        yield workers, logs
    finally:
        for worker in workers:
            worker.kill()
            worker.join(10)


def test_a_stream_falls_in_one_partition_the_same_in_every_process() -> None:
    assert partition_of("order-42", 4) == partition_of("order-42", 4)
    counts: dict[int, int] = defaultdict(int)
    for n in range(1000):
        counts[partition_of(f"order-{n}", 4)] += 1
    assert set(counts) == {0, 1, 2, 3} and min(counts.values()) > 200
    assert Partition(1, 4).name_of("shipping") == "shipping.p1of4"
    with pytest.raises(DefinitionError, match="0 <= index < count"):
        Partition(4, 4)


def test_one_runner_alone_handles_every_partition_in_order(sqlite_url: str) -> None:
    seen: list[tuple[str, int]] = []
    with EventStore.open(sqlite_url) as store:
        for n in range(30):
            store.append(f"order-{n % 5}", [NewEvent("Shipped", {"n": n})])
        subscription = Subscription("shipping", lambda e: seen.append((e.stream_id, e.version)))
        with PartitionedRunner.for_subscription(store, subscription, partitions=3) as runner:
            while runner.step():
                pass
            assert len(runner.held) == 3
            assert all(isinstance(w.definition, PartitionSubscription) for w in runner.workers)  # type: ignore[attr-defined]
    assert sorted(seen) == sorted((f"order-{n}", v) for n in range(5) for v in range(1, 7))
    for n in range(5):
        assert [v for s, v in seen if s == f"order-{n}"] == list(range(1, 7))


@pytest.mark.slow
def test_two_workers_share_the_partitions_and_one_takes_over_when_the_other_dies(
    pg_url: str, tmp_path: Path
) -> None:
    streams = [f"order-{n}" for n in range(40)]
    with EventStore.open(pg_url) as store:
        for round_ in range(30):
            for stream in streams:
                store.append(stream, [NewEvent("Shipped", {"round": round_})])
    wanted = {(s, v) for s in streams for v in range(1, 31)}
    with two_handlers(pg_url, tmp_path, 4, 0.002) as (workers, logs):
        # Both have work before one dies: the partitions were shared.
        wait_for(lambda: all(p.exists() and p.stat().st_size > 0 for p in logs), 60, "both")
        workers[0].kill()
        workers[0].join(10)
        killed_at = time.time_ns()
        wait_for(lambda: {(s, v) for _, s, v in handled(logs)} >= wanted, 120, "every event")
    lines = handled(logs)
    first_seen: dict[tuple[str, int], int] = {}
    for stamp, stream, version in lines:
        first_seen.setdefault((stream, version), stamp)
    # Each stream's events were first handled in order, whichever process had them.
    for stream in streams:
        stamps = [first_seen[(stream, v)] for v in range(1, 31)]
        assert stamps == sorted(stamps)
    dead = {partition_of(stream, 4) for _, stream, _ in handled(logs[:1])}
    after_death = {partition_of(stream, 4) for t, stream, _ in handled(logs[1:]) if t > killed_at}
    assert dead and dead <= after_death, "the survivor took over the dead worker's partitions"


@pytest.mark.slow
def test_a_batch_that_outlasts_the_lease_is_delivered_by_one_process(
    pg_url: str, tmp_path: Path
) -> None:
    """20 deliveries of 0.25 s in a batch of 20, under a lease of 1 s: the holder keeps
    the lease through the batch, and the other process waits its turn."""
    streams = [f"order-{n}" for n in range(20)]
    with EventStore.open(pg_url) as store:
        last = max(store.append(s, [NewEvent("Shipped", {})]).positions[0] for s in streams)
    database = Database(engine_for(pg_url))

    def twice(logs: list[Path]) -> dict[tuple[str, int], int]:
        deliveries = Counter((stream, version) for _, stream, version in handled(logs))
        return {key: n for key, n in deliveries.items() if n > 1}

    def checkpoint() -> int:
        with database.reading() as connection:
            row = checkpoints.read(connection, "shipping.p0of1")
        return 0 if row is None else row.position

    try:
        with two_handlers(pg_url, tmp_path, 1, 0.25) as (_, logs):
            wanted = {(stream, 1) for stream in streams}
            wait_for(lambda: {(s, v) for _, s, v in handled(logs)} >= wanted, 60, "every event")
            assert twice(logs) == {}
            wait_for(lambda: checkpoint() == last, 30, "the checkpoint to reach the last event")
    finally:
        database.close()
    assert twice(logs) == {}


@pytest.mark.slow
def test_a_member_whose_batch_outlasts_its_leases_stays_a_member(sqlite_url: str) -> None:
    """Members count each other by their leases: the only member, busy with a long
    batch, is never counted gone."""
    live: list[int] = []
    with EventStore.open(sqlite_url) as store:
        for n in range(10):
            store.append(f"order-{n}", [NewEvent("Shipped", {})])

        def handle(event: RecordedEvent) -> None:
            # A slow call: ten of them outlast the lease of 3 s. The batch renews the lease
            # (and the membership) once half of it has passed: 1.4 s of slack for a
            # renewal that a loaded machine makes late (at load 18, 0.4 s was not enough).
            time.sleep(0.4)
            counted = sa.select(sa.func.count()).where(members.c.lease_until >= time.time())
            with runner.database.reading() as connection:
                live.append(connection.execute(counted).scalar_one())

        shipping = Subscription("shipping", handle)
        with PartitionedRunner.for_subscription(
            store, shipping, partitions=1, batch_size=10, lease_ttl=3.0
        ) as runner:
            assert runner.step()
    assert len(live) == 10 and 0 not in live


def test_a_projection_split_in_partitions_applies_each_event_once_to_shared_tables(
    sqlite_url: str,
) -> None:
    with EventStore.open(sqlite_url) as store:
        last = models.append_history(store, accounts=6, per_account=5)
        with PartitionedRunner.for_projection(store, models.audit, partitions=3) as runner:
            while runner.step():
                pass
            with runner.database.reading() as connection:
                applied = models.rows(connection, models.applied_table)
        with pytest.raises(DefinitionError, match="only a Projection"):
            PartitionedRunner.for_projection(store, models.balances, partitions=2)  # type: ignore[arg-type]
    assert sorted(p for p, _, _ in applied) == list(range(1, last + 1))


@pytest.mark.slow
def test_a_partitioned_projection_killed_mid_batch_applies_each_event_exactly_once(
    pg_url: str, tmp_path: Path
) -> None:
    with EventStore.open(pg_url) as store:
        last = models.append_history(store, accounts=20, per_account=15)
    marker = tmp_path / "trapped"
    workers = [
        PROCESSES.Process(target=project_partitions, args=(pg_url, last // 2, str(marker)))
        for _ in range(2)
    ]
    for worker in workers:
        worker.start()
    try:
        wait_for(marker.exists, 60, "a worker to hang mid-batch")
        trapped = int(marker.read_text())
        for worker in workers:
            if worker.pid == trapped:
                worker.kill()
                worker.join(10)
        database = Database(engine_for(pg_url))
        try:

            def applied() -> list[tuple[int, str, int]]:
                with database.reading() as connection:
                    return models.rows(connection, models.applied_table)

            wait_for(lambda: len(applied()) >= last, 120, "every event applied")
            positions = [p for p, _, _ in applied()]
        finally:
            database.close()
    finally:
        for worker in workers:
            worker.kill()
            worker.join(10)
    assert sorted(positions) == list(range(1, last + 1))


def test_workers_starting_together_create_the_partition_tables_one_at_a_time(
    pg_url: str,
) -> None:
    """Two processes that both found the partition tables missing both created them, and
    one died at start on the catalogue's unique index (seen in CI): their creation takes
    the projections' DDL lock, so a runner starting while another holds it waits for it."""
    import threading

    import psycopg
    from eventcraft.projections.competing import PartitionedRunner as Runner
    from eventcraft.projections.competing import metadata as partition_tables

    from tests.conftest import PG_URL

    schema = pg_url.rsplit("schema=", 1)[1]
    with EventStore.open(pg_url) as store:
        store.append("order-1", [NewEvent("Shipped", {})])
        subscription = Subscription("shipping", lambda event: None)
        with PartitionedRunner.for_subscription(store, subscription, partitions=2) as first:
            workers = first.workers
        options = f"-c search_path={schema}"
        with psycopg.connect(PG_URL, autocommit=True, options=options) as conn:
            for table in partition_tables.sorted_tables:
                conn.execute(f"DROP TABLE {table.name}")  # missing again, as on a new schema
        with psycopg.connect(PG_URL, options=options) as holder:
            holder.execute(
                "SELECT pg_advisory_xact_lock("
                "hashtext('eventcraft-projections:' || current_schema()))"
            )
            created = threading.Event()

            def start() -> None:
                Runner(store, "shipping", workers).close()
                created.set()

            starting = threading.Thread(target=start)
            starting.start()
            assert not created.wait(1.0), "the runner created its tables without the lock"
            holder.rollback()  # another process's creation ends
            starting.join(30)
            assert created.is_set()


def split(kind: str) -> Any:
    """The runner's constructor for a definition of `kind` (as `failing_once` makes)."""
    if kind == "projection":
        return PartitionedRunner.for_projection
    return PartitionedRunner.for_subscription


@pytest.mark.parametrize("kind", ["projection", "subscription"])
def test_stopping_a_partitioned_runner_stops_its_partitions_during_a_back_off(
    store: EventStore, kind: str
) -> None:
    """A deploy stops the runner during the minute's back-off before an event's second
    try: the stop returns with the partitions given back, and the event is the next
    run's, neither parked nor passed."""
    first, blip, last = models.notes(store, "a", "blip", "c")
    sent: list[int] = []
    failed = threading.Event()
    definition = models.failing_once(kind, sent, failed)
    with split(kind)(store, definition, partitions=2) as runner:
        names = [worker.name for worker in runner.workers]
        runner.start()
        assert failed.wait(30), "the first try of 'blip' never came"
        runner.stop()
        with runner.database.reading() as connection:
            rows = checkpoints.read_many(connection, names)
            listed = connection.execute(sa.select(members)).all()
            left = [p for name in names for p in parking.listed(connection, name)]
        assert [rows[name].owner for name in names] == [None, None]
        assert listed == [] and left == []
        holder = Partition(partition_of("notebook-1", 2), 2).name_of("notes")
        assert rows[holder].position == first
    with split(kind)(store, definition, partitions=2) as again:
        while again.step():
            pass
        with again.database.reading() as connection:
            left = [p for name in names for p in parking.listed(connection, name)]
            if kind == "projection":
                sent = [position for position, _ in models.rows(connection, models.notes_table)]
    assert left == []
    assert sent == [first, blip, last]


@pytest.mark.parametrize("kind", ["projection", "subscription"])
def test_the_members_listing_shows_a_runner_by_its_own_name_from_its_first_write(
    shared_store_url: str, kind: str
) -> None:
    """An operator listing the group sees the name that holds the leases, never another
    made up while the runner was being put together."""
    written: set[str] = set()

    def watch(_: Any, __: Any, statement: str, parameters: Any, *rest: Any) -> None:
        if "eventcraft_partition_members" in statement and not statement.startswith("SELECT"):
            values = parameters.values() if isinstance(parameters, dict) else parameters
            written.update(v for v in values if isinstance(v, str) and v != "notes")

    engine = engine_for(shared_store_url)
    sa.event.listen(engine, "before_cursor_execute", watch)
    try:
        with EventStore.open(shared_store_url) as store:
            models.notes(store, "a", "b", "c")
            definition = models.failing_once(kind, [], threading.Event())
            with split(kind)(store, definition, partitions=2, database=engine) as runner:
                with runner.database.reading() as connection:
                    listed = connection.execute(sa.select(members.c.owner)).scalars().all()
                assert listed == [runner.owner]
                while runner.step():
                    pass
                with runner.database.reading() as connection:
                    rows = checkpoints.read_many(connection, [w.name for w in runner.workers])
                    listed = connection.execute(sa.select(members.c.owner)).scalars().all()
                assert {row.owner for row in rows.values()} == {runner.owner}
                assert listed == [runner.owner]
    finally:
        engine.dispose()
    assert written == {runner.owner}
