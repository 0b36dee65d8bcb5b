"""Retention on a PostgreSQL store partitioned by position (`?partition_events=10`,
`eventstore/postgres/partition_retention.py`): a partition wholly at or below the mark is
replaced by a table of the rows the run keeps (dropped when it keeps none) instead of
having rows deleted, and the run keeps every promise row deletion keeps. The same rules on
an unpartitioned store remove the same events, free the same ids, answer a retry alike;
readers in another process never see a removed event come back or a kept one go; a run
killed between detaching a partition and attaching its replacement leaves the store as it
was, and the next run finishes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import psycopg
import pytest
from eventcraft.eventstore import (
    ANY,
    NO_STREAM,
    AppendResult,
    DuplicateEventId,
    EventStore,
    ExpectedVersion,
    NewEvent,
    WrongExpectedVersion,
)
from eventcraft.eventstore.postgres import partition_retention
from eventcraft.eventstore.sql.schema import APPEND_ONLY_SQLSTATE

from eventcraft.operations import retention
from eventcraft.operations.errors import Problems

from ..conftest import PG_URL
from ..processes import PROCESSES
from ..waiting import until
from . import partition_retention_workers
from .partition_retention_workers import RULES

SIZE = 10
OLD = datetime.now(UTC) - timedelta(days=40)
Catalog = psycopg.Connection[tuple[object, ...]]


def _schema(url: str) -> str:
    return parse_qs(urlsplit(url).query)["schema"][0]


@pytest.fixture
def catalog() -> Iterator[Catalog]:
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        yield conn


@pytest.fixture
def url(pg_url: str) -> str:
    return f"{pg_url}&partition_events={SIZE}"


@pytest.fixture
def patient(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs that wait up to a minute for the swap's lock, not 2 s: on a loaded machine a
    catalog reader or autovacuum elsewhere may hold the table that long, and these tests
    look at what the swap does (the fallback has tests of its own)."""
    monkeypatch.setattr(partition_retention, "SWAP_LOCK_TIMEOUT", "60s")


@pytest.fixture
def plain(pg_url: str, catalog: Catalog) -> Iterator[str]:
    """An unpartitioned store's URL beside the partitioned one, dropped after."""
    other = pg_url.replace(_schema(pg_url), f"{_schema(pg_url)}_plain")
    yield other
    catalog.execute(f"DROP SCHEMA IF EXISTS {_schema(other)} CASCADE")


def _fill(store: EventStore) -> None:
    """88 events: [0, 10) all removable (order-9's but its newest), [10, 20) nothing
    removable, then every rule's events interleaved in every partition up to the head:
    by age (order-*, tagged), by count (cart-*), a truncation (sensor-1), a deleted
    stream with a snapshot (gone-1), and streams no rule names (live-*)."""
    store.append("order-9", [NewEvent("Placed", {"i": i}, recorded_at=OLD) for i in range(9)])
    store.append("live-block", [NewEvent("Logged", {"i": i}) for i in range(10)])
    for r in range(8):
        for n in range(3):
            placed = NewEvent("Placed", {"r": r}, tags=[f"order:{n}"], recorded_at=OLD)
            store.append(f"order-{n}", [placed])
        store.append(f"cart-{r % 2}", [NewEvent("ItemAdded", {"r": r})])
        store.append("sensor-1", [NewEvent("Measured", {"r": r, "i": i}) for i in range(2)])
        store.append(f"live-{r}", [NewEvent("Logged", {"r": r}) for _ in range(2)])
        if r == 2:
            store.append("gone-1", [NewEvent("Opened", {"i": i}) for i in range(4)])
            store.save_snapshot("gone-1", version=4, type="Gone", data={})
        if r == 5:
            store.delete_stream("gone-1")
    store.append("order-9", [NewEvent("Shipped", {}, recorded_at=OLD)])
    assert store.high_water_mark() == 88


def _log(store: EventStore) -> list[tuple[int, str, str, int]]:
    return [(e.position, str(e.id), e.stream_id, e.version) for e in store.read_all()]


def _rows(catalog: Catalog, url: str, query: str) -> list[tuple[object, ...]]:
    return catalog.execute(query.replace("{schema}", _schema(url))).fetchall()


def _partitions(catalog: Catalog, url: str) -> dict[int, tuple[int, str | None]]:
    """Each partition's number: its table's oid and its comment."""
    rows = _rows(
        catalog,
        url,
        "SELECT c.relname, c.oid::bigint, obj_description(c.oid, 'pg_class') FROM pg_inherits i "
        "JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = '{schema}.eventcraft_events'::regclass",
    )
    return {int(str(n).rsplit("_p", 1)[1]): (int(str(o)), c) for n, o, c in rows}  # type: ignore[misc]


def _log_row_deletes(catalog: Catalog, url: str) -> None:
    """A row trigger on the events (cloned to every partition, replacements too) that
    writes down each row a statement deletes."""
    schema = _schema(url)
    catalog.execute(f"CREATE TABLE {schema}.deleted_rows (position bigint)")
    catalog.execute(
        f"CREATE FUNCTION {schema}.log_delete() RETURNS trigger LANGUAGE plpgsql AS $$ "
        f"BEGIN INSERT INTO {schema}.deleted_rows VALUES (OLD.position); RETURN OLD; END $$"
    )
    catalog.execute(
        f"CREATE TRIGGER log_delete AFTER DELETE ON {schema}.eventcraft_events "
        f"FOR EACH ROW EXECUTE FUNCTION {schema}.log_delete()"
    )


def _keys_are_the_events(catalog: Catalog, url: str) -> None:
    keys = _rows(
        catalog, url, "SELECT id, stream_id, version, position FROM {schema}.eventcraft_event_keys"
    )
    events = _rows(
        catalog, url, "SELECT id, stream_id, version, position FROM {schema}.eventcraft_events"
    )
    assert sorted(keys, key=str) == sorted(events, key=str)


def test_a_run_removes_from_a_partitioned_store_what_it_removes_from_an_unpartitioned_one(
    url: str, plain: str, catalog: Catalog, tmp_path: Path, patient: None
) -> None:
    """The same log and rules on both: the same events stay, the same count and rules are
    recorded, the same tag rows and snapshots go. On the partitioned store no row below
    the partition the mark (75) straddles is deleted: [0, 10), of removed events only, is
    dropped, [10, 20), whose rows all stay, is left as it was, the others below [70, 80)
    replaced; [70, 80) has rows deleted, and is marked for the next run to replace."""
    results = {}
    for name, at in (("plain", plain), ("partitioned", url)):
        with EventStore.open(at) as store:
            _fill(store)
            if name == "partitioned":
                _log_row_deletes(catalog, url)
                before = _partitions(catalog, url)
            report = retention.apply(store, *RULES, str(tmp_path / name), up_to=75)
            tags = _rows(catalog, at, "SELECT tag, position FROM {schema}.eventcraft_tags")
            snapshots = _rows(catalog, at, "SELECT stream_id FROM {schema}.eventcraft_snapshots")
            streams = ["order-0", "order-9", "cart-0", "sensor-1", "gone-1", "live-3"]
            results[name] = (
                [(position, stream, version) for position, _, stream, version in _log(store)],
                report.run.removed,
                report.run.rules,
                sorted(tags, key=str),
                snapshots,
                [store.stream_version(s) for s in streams],
            )
    assert results["partitioned"] == results["plain"]
    assert results["plain"][1] > 30
    after = _partitions(catalog, url)
    assert 0 not in after  # kept nothing
    assert after[1] == before[1]  # took nothing from it
    assert all(after[k][0] != before[k][0] for k in range(2, 7))  # replaced
    assert after[7] == (before[7][0], partition_retention.PENDING)  # straddled: rows deleted
    assert after[8] == before[8]  # above the mark
    deleted = [int(str(p)) for (p,) in _rows(catalog, url, "SELECT * FROM {schema}.deleted_rows")]
    assert sorted(deleted) == [72, 73, 74]  # order-0..2's seventh events
    _keys_are_the_events(catalog, url)


def test_the_next_run_replaces_the_partition_it_deleted_rows_of_once_wholly_below(
    url: str, catalog: Catalog, tmp_path: Path, patient: None
) -> None:
    with EventStore.open(url) as store:
        _fill(store)
        retention.apply(store, *RULES, str(tmp_path), up_to=75)
        kept = _log(store)
        straddled = _partitions(catalog, url)[7]
        store.append("live-9", [NewEvent("Logged", {}) for _ in range(5)])
        report = retention.apply(store, *RULES, str(tmp_path))
        assert report.run.removed == 0  # nothing more to take
        assert _log(store) == [*kept, *[e for e in _log(store) if e[2] == "live-9"]]
    replaced = _partitions(catalog, url)[7]  # pending, wholly below now: replaced
    assert replaced[0] != straddled[0] and replaced[1] is None
    _keys_are_the_events(catalog, url)


@pytest.mark.parametrize(
    "expected", [NO_STREAM, 3, ANY], ids=["no stream", "its version", "any version"]
)
def test_a_retry_of_an_append_a_run_removed_is_answered_as_on_an_unpartitioned_store(
    url: str, plain: str, expected: ExpectedVersion, tmp_path: Path
) -> None:
    """Its events gone, the store holds no trace of its ids (the key rows went with the
    events): a retry at a version is a `WrongExpectedVersion`, one at ANY is new events,
    on either store."""
    answers: dict[str, object] = {}
    for name, at in (("plain", plain), ("partitioned", url)):
        with EventStore.open(at) as store:
            store.append("order-1", [NewEvent("Placed", {}, recorded_at=OLD) for _ in range(3)])
            batch = [NewEvent("Placed", {"n": n}, recorded_at=OLD) for n in range(3)]
            store.append("order-1", batch, expected_version=3)
            store.append("order-1", [NewEvent("Shipped", {})])
            store.append("filler-1", [NewEvent("Filled", {}) for _ in range(25)])
            assert retention.apply(store, *RULES, str(tmp_path / name)).run.removed == 6
            try:
                answers[name] = store.append("order-1", batch, expected_version=expected)
            except WrongExpectedVersion as error:
                answers[name] = (type(error), str(error))
    assert answers["partitioned"] == answers["plain"]
    if expected is ANY:
        assert answers["plain"] == AppendResult(version=10, positions=(33, 34, 35))
    else:
        assert answers["plain"][0] is WrongExpectedVersion  # type: ignore[index]


def test_a_delete_or_truncate_sent_to_a_partition_is_refused_as_one_sent_to_the_events(
    url: str, catalog: Catalog, tmp_path: Path, patient: None
) -> None:
    """Before retention's first run (the row trigger), after it (its statement triggers,
    on the events table and on each partition), on a partition made after it and on one
    a run replaced."""
    schema = _schema(url)

    def refused(statement: str) -> bool:
        try:
            catalog.execute(statement)
        except psycopg.Error as error:
            assert error.sqlstate == APPEND_ONLY_SQLSTATE, error
            return True
        return False

    with EventStore.open(url) as store:
        _fill(store)
        assert refused(f"DELETE FROM {schema}.eventcraft_events_p3")
        retention.apply(store, *RULES, str(tmp_path), up_to=75)  # replaces [30, 40)
        store.append("live-9", [NewEvent("Logged", {}) for _ in range(25)])  # makes [100, 120)
    for number in (1, 3, 7, 8, 11):  # untouched, replaced, straddled, above, made since
        for statement in ("DELETE FROM {}", "TRUNCATE {}", "DELETE FROM {} WHERE position = 0"):
            assert refused(statement.format(f"{schema}.eventcraft_events_p{number}")), number
    assert refused(f"DELETE FROM {schema}.eventcraft_events")
    assert refused(f"TRUNCATE {schema}.eventcraft_events")
    assert _rows(catalog, url, "SELECT count(*) FROM {schema}.eventcraft_events") != [(0,)]


@pytest.mark.slow
def test_readers_and_writers_in_processes_see_a_run_whole_or_not_at_all(
    url: str, catalog: Catalog, tmp_path: Path
) -> None:
    """A process reads the whole log again and again, another appends, while a run
    replaces some thirty partitions: every event the run keeps is in every read, one it
    removed never comes back once a read missed it, and no appended event is lost."""
    with EventStore.open(url) as store:
        for block in range(10):
            _fill_block(store, block)
        head = store.high_water_mark()
        before = {e.position for e in store.read_all()}
        with PROCESSES.Manager() as manager:
            started = [manager.Event(), manager.Event()]
            stop = manager.Event()
            reader = PROCESSES.Pool(2)
            try:
                reads = reader.apply_async(
                    partition_retention_workers.read_passes, (url, started[0], stop)
                )
                appends = reader.apply_async(
                    partition_retention_workers.append_while, (url, started[1], stop)
                )
                for event in started:
                    assert event.wait(60)
                report = retention.apply(store, *RULES, str(tmp_path), up_to=head)
                stop.set()
                passes, appended = reads.get(120), appends.get(120)
            finally:
                reader.terminate()
                reader.join()
        kept = {e.position for e in store.read_all() if e.position <= head}
        assert len(before) - len(kept) == report.run.removed > 200
        assert [e.version for e in store.read_stream("meanwhile-1")] == list(range(1, appended + 1))
    assert len(passes) >= 2
    seen = before
    for positions in passes:
        assert positions == sorted(positions)
        below = {p for p in positions if p <= head}
        assert kept <= below <= seen  # nothing kept missing, nothing removed back
        seen = below
    assert seen == kept
    _keys_are_the_events(catalog, url)


def _fill_block(store: EventStore, block: int) -> None:
    """30 events: 27 old ones of three streams (all but the newest of each removable by
    age) and 3 of a stream no rule names."""
    for n in range(3):
        old = [NewEvent("Placed", {"b": block, "i": i}, recorded_at=OLD) for i in range(9)]
        store.append(f"order-{block}-{n}", old)
    store.append(f"live-{block}", [NewEvent("Logged", {"b": block}) for _ in range(3)])


def test_a_run_killed_between_detach_and_attach_leaves_the_store_and_the_next_run_finishes(
    url: str, catalog: Catalog, tmp_path: Path, patient: None
) -> None:
    """The run's process is killed (SIGKILL) right after it detached a partition, before it
    attached the replacement: the server rolls the run back whole (its DDL is
    transactional), so every event, key, tag and partition is as it was, and the next run
    does what the killed one would have."""
    archive = str(tmp_path / "archive")
    with EventStore.open(url) as store:
        _fill(store)
        log, partitions = _log(store), _partitions(catalog, url)
        keys = _rows(catalog, url, "SELECT id FROM {schema}.eventcraft_event_keys ORDER BY id")
        with PROCESSES.Manager() as manager:
            reached = manager.Event()
            run = PROCESSES.Process(
                target=partition_retention_workers.stop_after_detaching,
                args=(url, archive, reached),
            )
            run.start()
            try:
                assert reached.wait(120), "the run never detached a partition"
            finally:
                run.kill()
                run.join(30)
        assert _log(store) == log  # waits for the server to have rolled the run back
        assert _partitions(catalog, url) == partitions
        assert store.low_water_mark() == 0 and store.retention.runs() == []
        assert (
            _rows(catalog, url, "SELECT id FROM {schema}.eventcraft_event_keys ORDER BY id") == keys
        )
        report = _apply_when_free(store, archive)
        assert report.run.removed > 30 and store.low_water_mark() == 88
    assert 0 not in _partitions(catalog, url)
    _keys_are_the_events(catalog, url)


def _apply_when_free(store: EventStore, archive: str) -> retention.RetentionReport:
    """A run, once the killed run's session, and with it the retention lock, has ended."""
    done: list[retention.RetentionReport] = []

    def ran() -> bool:
        try:
            done.append(retention.apply(store, *RULES, archive))
        except Problems as busy:
            assert "another retention run holds the retention lock" in str(busy)
            time.sleep(0.05)
            return False
        return True

    until(ran, "the killed run's retention lock to be released")
    return done[0]


@pytest.mark.slow
def test_behind_a_reader_holding_the_table_a_run_deletes_rows_and_the_next_one_replaces(
    url: str, catalog: Catalog, tmp_path: Path
) -> None:
    """The swap's lock not had within `SWAP_LOCK_TIMEOUT` (a reader's open transaction
    holds the events table): the run removes the same events by deleting rows, their keys
    with them, and marks the partitions; the next run, the reader gone, replaces them."""
    with EventStore.open(url) as store:
        _fill(store)
        retention.apply(store, *RULES, str(tmp_path), up_to=5)  # makes retention's triggers
        before = _partitions(catalog, url)
        with psycopg.connect(PG_URL) as reader:
            reader.execute(f"SELECT count(*) FROM {_schema(url)}.eventcraft_events").fetchone()
            report = retention.apply(store, *RULES, str(tmp_path), up_to=75)
        assert report.run.removed > 30
        held = _partitions(catalog, url)
        assert {k: oid for k, (oid, _) in held.items()} == {
            k: oid for k, (oid, _) in before.items()
        }
        assert {k for k, (_, note) in held.items() if note} == {0, 2, 3, 4, 5, 6, 7}
        _keys_are_the_events(catalog, url)
        kept = _log(store)
        retention.apply(store, *RULES, str(tmp_path))  # nothing more to remove: replaces
        assert _log(store) == kept
    after = _partitions(catalog, url)
    assert 0 not in after and after[1] == before[1]
    assert all(after[k][0] != before[k][0] and after[k][1] is None for k in range(2, 8))
    _keys_are_the_events(catalog, url)


def test_a_retry_of_an_append_a_replaced_partition_kept_returns_its_first_result(
    url: str, catalog: Catalog, tmp_path: Path, patient: None
) -> None:
    """Idempotency by event id across a replacement: the kept event's key row stays, and
    its row is in the new partition, so a retry is answered with the first result and the
    same id elsewhere is refused."""
    with EventStore.open(url) as store:
        store.append("order-1", [NewEvent("Placed", {"i": i}, recorded_at=OLD) for i in range(5)])
        shipped = [NewEvent("Shipped", {})]
        first = store.append("order-1", shipped, expected_version=5)
        store.append("filler-1", [NewEvent("Filled", {}) for _ in range(20)])
        before = _partitions(catalog, url)
        assert retention.apply(store, *RULES, str(tmp_path), up_to=25).run.removed == 5
        assert _partitions(catalog, url)[0][0] != before[0][0]  # [0, 10) replaced
        assert store.append("order-1", shipped, expected_version=5) == first
        with pytest.raises(DuplicateEventId):
            store.append("order-2", shipped)
        assert store.stream_version("order-1") == 6
