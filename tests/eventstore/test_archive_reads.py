"""A store opened with `archive=` reads its log whole: below the low-water mark from the
Parquet archive retention wrote, then the table, each event once and as it was before the
run, through every read of the global log and of a stream, on SQLite and PostgreSQL and
through both APIs; and while runs move the mark under a reader in another process."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from eventcraft.eventstore import (
    AsyncEventStore,
    EventStore,
    InvalidEvent,
    NewEvent,
    RecordedEvent,
)
from eventcraft.eventstore.blocking import BlockingEventStore
from eventcraft.eventstore.retention import ArchiveUnreadable

from eventcraft.operations import retention

from ..processes import PROCESSES
from .archive_workers import ORDERS, run_in_steps, run_once

Opener = Callable[..., EventStore]


@pytest.fixture(params=["sync", "async"])
def opener(request: pytest.FixtureRequest) -> Iterator[Opener]:
    """Opens a store: an `EventStore`, or an `AsyncEventStore` behind a blocking face (the
    conformance suite's way of running one test body on both APIs)."""
    opened: list[Any] = []

    def open_store(url: str, **options: Any) -> EventStore:
        if request.param == "sync":
            store = EventStore.open(url, **options)
        else:
            # BlockingEventStore.open takes no store options: its parts, with archive=.
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, daemon=True)
            thread.start()
            blocking = BlockingEventStore(loop, thread)
            try:
                blocking.store = blocking._wait(AsyncEventStore.open(url, **options))
            except BaseException:
                blocking._stop()
                raise
            store = cast(EventStore, blocking)
        opened.append(store)
        return store

    yield open_store
    for store in opened:
        store.close()


@pytest.fixture(params=["sqlite", "postgres", "postgres-partitioned"])
def racing_url(request: pytest.FixtureRequest) -> str:
    """A store several processes open, the PostgreSQL one partitioned too: retention there
    replaces partitions wholly below the mark (`postgres/partitions.py`)."""
    if request.param == "sqlite":
        return str(request.getfixturevalue("sqlite_url"))
    url = str(request.getfixturevalue("pg_url"))
    return f"{url}&partition_events=50" if request.param == "postgres-partitioned" else url


def _fields(event: RecordedEvent) -> tuple[Any, ...]:
    return (
        event.position,
        event.id,
        event.stream_id,
        event.version,
        event.type,
        event.data,
        event.metadata,
        event.recorded_at,
        event.tags,
    )


def _history(store: EventStore) -> None:
    """Orders (all but each one's newest event go), a cart (kept whole), tags, metadata,
    and a stream deleted then written again."""
    for n in range(6):
        store.append(
            f"order-{n}",
            [
                NewEvent(
                    "Paid" if k % 2 else "Placed",
                    {"n": n, "k": k, "note": "line\u2028break\n"},
                    metadata={"event_version": 2} if k == 1 else {"by": f"u{n}"},
                    tags=[f"customer:c{n % 2}"] if k < 2 else [],
                )
                for k in range(5)
            ],
        )
        store.append("cart-1", [NewEvent("ItemAdded", {"n": n})])
    store.append("order-gone", [NewEvent("Placed", {}), NewEvent("Paid", {})])
    store.delete_stream("order-gone")
    store.append("order-gone", [NewEvent("Placed", {"again": True})])


def _retained(url: str, archive: Path) -> int:
    """Run retention on the store at `url` into `archive`, then append after its mark."""
    with EventStore.open(url) as store:
        run = retention.apply(store, ORDERS, [], str(archive)).run
        store.append("order-0", [NewEvent("Paid", {"after": "the run"})])
        assert run.removed > 20
        return run.up_to


def test_read_all_from_0_returns_the_archived_events_then_the_tables_each_once(
    shared_store_url: str, tmp_path: Path, opener: Opener
) -> None:
    url = shared_store_url
    with EventStore.open(url) as store:
        _history(store)
        before = [_fields(e) for e in store.read_all()]
    mark = _retained(url, tmp_path / "archive")

    with EventStore.open(url) as table:
        kept = [e.position for e in table.read_all()]
        assert len(kept) < len(before)  # the holes retention left in the table
    store = opener(url, archive=True)
    read = [_fields(e) for e in store.read_all()]
    assert read[: len(before)] == before
    assert [e[0] for e in read[len(before) :]] == [kept[-1]]  # the append after the run
    assert len({e[1] for e in read}) == len(read)  # every event once
    assert store.low_water_mark() == mark


def test_every_start_limit_and_filter_reads_what_the_whole_log_holds(
    shared_store_url: str, tmp_path: Path, opener: Opener
) -> None:
    url = shared_store_url
    with EventStore.open(url) as store:
        _history(store)
    _retained(url, tmp_path / "archive")
    store = opener(url, archive=True)
    whole = list(store.read_all())
    positions = [e.position for e in whole]
    for after in range(positions[-1] + 1):
        later = [p for p in positions if p > after]
        for limit in (1, 2, 7, None):
            read = [e.position for e in store.read_all(after=after, limit=limit)]
            assert read == later[:limit], (after, limit)
    for categories, types in [(["order"], None), (["cart"], None), (None, ["Paid"])]:
        filtered = [
            e.position
            for e in whole
            if (categories is None or e.stream_id.split("-")[0] in categories)
            and (types is None or e.type in types)
        ]
        read = [e.position for e in store.read_all(categories=categories, types=types)]
        assert read == filtered
        some = store.read_all(after=5, limit=3, categories=categories, types=types)
        assert [e.position for e in some] == [p for p in filtered if p > 5][:3]


def test_encoded_and_json_reads_give_what_they_gave_before_retention(
    shared_store_url: str, tmp_path: Path, opener: Opener
) -> None:
    url = shared_store_url
    with EventStore.open(url) as store:
        _history(store)
        head = store.high_water_mark()
        records = list(store.read_all_encoded())
        lines = "".join(chunk.text for chunk in store.read_all_json())
    mark = _retained(url, tmp_path / "archive")

    store = opener(url, archive=True)
    assert list(store.read_all_encoded(until=head)) == records
    for after, until in [(0, mark), (3, mark - 2), (mark - 1, head), (mark, head)]:
        assert list(store.read_all_encoded(after, until)) == [
            r for r in records if after < r.position <= until
        ]
    chunks = list(store.read_all_json(until=head))
    assert sum(chunk.events for chunk in chunks) == len(records)
    assert chunks[-1].last_position == head
    assert [json.loads(line) for line in "".join(c.text for c in chunks).split("\n") if line] == [
        json.loads(line) for line in lines.split("\n") if line
    ]
    orders = list(store.read_all_encoded(categories=["order"], types=["Placed"], until=head))
    assert orders == [r for r in records if r.stream_id.startswith("order-") and r.type == "Placed"]


def test_stream_reads_give_the_archived_versions_then_the_tables(
    shared_store_url: str, tmp_path: Path, opener: Opener
) -> None:
    url = shared_store_url
    with EventStore.open(url) as store:
        _history(store)
        forwards = [_fields(e) for e in store.read_stream("order-3")]
        encoded = list(store.read_stream_encoded("order-3"))
        gone = [_fields(e) for e in store.read_stream("order-gone")]
    _retained(url, tmp_path / "archive")

    store = opener(url, archive=True)
    assert [_fields(e) for e in store.read_stream("order-3")] == forwards
    assert [_fields(e) for e in store.read_stream("order-3", backwards=True)] == forwards[::-1]
    assert [e.version for e in store.read_stream("order-3", from_version=2, limit=2)] == [2, 3]
    assert [e.version for e in store.read_stream("order-3", from_version=3, backwards=True)] == [
        3,
        2,
        1,
    ]
    assert [e.version for e in store.read_stream("order-3", backwards=True, limit=3)] == [5, 4, 3]
    assert [e.version for e in store.read_stream("order-3", from_version=9, backwards=True)] == [
        5,
        4,
        3,
        2,
        1,
    ]
    assert list(store.read_stream("order-3", from_version=6)) == []
    assert list(store.read_stream_encoded("order-3")) == encoded
    assert list(store.read_stream_encoded("order-3", from_version=4)) == encoded[3:]
    # A deletion hides what it hid: the archive's copies of those versions too.
    assert [_fields(e) for e in store.read_stream("order-gone")] == gone
    assert [e.version for e in store.read_stream("order-gone", backwards=True)] == [3]
    assert list(store.read_stream("order-none")) == []


def test_without_archive_reads_return_the_tables_events_alone(
    shared_store_url: str, tmp_path: Path, opener: Opener
) -> None:
    with EventStore.open(shared_store_url) as store:
        _history(store)
    mark = _retained(shared_store_url, tmp_path / "archive")
    store = opener(shared_store_url)  # archive=False: what every store read before
    assert getattr(store, "store", store).archive is False  # the async store behind a face
    read = [e.position for e in store.read_all()]
    assert read[0] > 1 and len([p for p in read if p <= mark]) < mark
    assert [e.version for e in store.read_stream("order-3")] == [5]


def test_an_archive_it_cannot_read_raises_before_any_event_below_the_mark(
    sqlite_url: str, tmp_path: Path, opener: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    archive = tmp_path / "archive"
    with EventStore.open(sqlite_url) as store:
        _history(store)
        whole = [e.id for e in store.read_all()]
    mark = _retained(sqlite_url, archive)
    store = opener(sqlite_url, archive=True)

    archive.rename(tmp_path / "moved")
    read: list[RecordedEvent] = []
    with pytest.raises(ArchiveUnreadable, match=rf"{archive} is missing.*low-water mark {mark}"):
        read.extend(store.read_all())
    assert read == []  # not the table's events with their holes
    with pytest.raises(ArchiveUnreadable, match="is missing"):
        list(store.read_stream("order-3"))
    assert [e.version for e in store.read_stream("order-3", from_version=5)] == [5]  # no hole
    assert len(list(store.read_all(after=mark))) == 1  # above the mark: the table alone

    # Named when opening: a folder moved, or mounted elsewhere.
    moved = opener(sqlite_url, archive=tmp_path / "moved")
    assert [e.id for e in moved.read_all()][: len(whole)] == whole

    # An older copy that ends below the mark.
    archive.mkdir()
    first = sorted((tmp_path / "moved").glob("from-*"))[0]
    shutil.copytree(first, archive / "from-000000000000001-to-000000000000003")
    with pytest.raises(ArchiveUnreadable, match="ends at position 3, below the low-water mark"):
        list(store.read_all())

    # Without pyarrow (the retention extra), the error names the extra.
    for name in ("pyarrow", "pyarrow.dataset", "pyarrow.compute"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(ArchiveUnreadable, match=r"needs pyarrow: install eventcraft\[retention\]"):
        list(moved.read_all())
    assert len(list(moved.read_all(after=mark))) == 1  # above the mark no pyarrow is needed


def test_archive_takes_true_or_a_folder(sqlite_url: str) -> None:
    for wrong in (1, "", None, ["archive"]):
        with pytest.raises(InvalidEvent, match="archive is True"):
            EventStore.open(sqlite_url, archive=wrong)  # type: ignore[arg-type]


@pytest.mark.slow
def test_a_reader_mid_way_when_a_run_moves_the_mark_reads_what_it_removed_from_the_archive(
    racing_url: str, tmp_path: Path, opener: Opener
) -> None:
    url = racing_url
    with EventStore.open(url) as store:
        for n in range(40):
            store.append(f"order-{n}", [NewEvent("Paid", {"k": k}) for k in range(100)])
        whole = [e.id for e in store.read_all()]
    store = opener(url, archive=True)
    reading = iter(store.read_all())
    # The async face hands over a read once read whole: it is mid-way on the sync face.
    first = [next(reading).id for _ in range(1500)]
    run = PROCESSES.Process(target=run_once, args=(url, str(tmp_path / "archive")))
    run.start()
    run.join(120)
    assert run.exitcode == 0
    with EventStore.open(url) as table:
        assert table.low_water_mark() == 4000
        assert len(list(table.read_all())) == 40  # each order's newest alone
    assert first + [e.id for e in reading] == whole


@pytest.mark.slow
def test_readers_while_runs_move_the_mark_in_another_process_read_the_whole_log(
    racing_url: str, tmp_path: Path, opener: Opener
) -> None:
    url = racing_url
    with EventStore.open(url) as store:
        for round in range(20):
            for n in range(10):
                store.append(
                    f"order-{n}", [NewEvent("Paid", {"r": round, "k": k}) for k in range(10)]
                )
        whole = [e.id for e in store.read_all()]
    marks = list(range(100, len(whole) + 1, 100))
    started = PROCESSES.Event()
    runs = PROCESSES.Process(
        target=run_in_steps, args=(url, str(tmp_path / "archive"), marks, started)
    )
    runs.start()
    store = opener(url, archive=True)
    reads = 0
    try:
        started.set()
        while runs.is_alive() or reads < 3:
            assert [e.id for e in store.read_all()] == whole
            assert [e.id for e in store.read_all(after=777, limit=1000)] == whole[777:1777]
            reads += 1
    finally:
        runs.join(120)
    assert runs.exitcode == 0
    assert store.low_water_mark() == marks[-1]
    assert [e.id for e in store.read_all()] == whole


def test_a_subscription_from_0_is_given_the_archived_events_then_the_tables_then_new_ones(
    shared_store_url: str, tmp_path: Path
) -> None:
    url = shared_store_url
    with EventStore.open(url) as store:
        _history(store)
    _retained(url, tmp_path / "archive")
    with EventStore.open(url, archive=True) as store:
        whole = [e.id for e in store.read_all()]

    async def subscribed() -> list[Any]:
        async with await AsyncEventStore.open(url, archive=True) as store:
            seen = []
            async for event in store.subscribe():
                seen.append(event.id)
                if len(seen) == len(whole):
                    await store.append("order-9", [NewEvent("Placed", {})])
                if len(seen) == len(whole) + 1:
                    return seen
        raise AssertionError("unreachable")

    seen = asyncio.run(subscribed())
    assert seen[:-1] == whole


@pytest.mark.slow
def test_an_async_reader_mid_way_when_a_run_moves_the_mark_reads_what_it_removed(
    racing_url: str, tmp_path: Path
) -> None:
    url = racing_url
    with EventStore.open(url) as store:
        for n in range(40):
            store.append(f"order-{n}", [NewEvent("Paid", {"k": k}) for k in range(100)])
        whole = [e.id for e in store.read_all()]

    async def read_across_a_run() -> list[Any]:
        async with await AsyncEventStore.open(url, archive=True) as store:
            reading = store.read_all()
            seen = [(await anext(reading)).id for _ in range(1500)]
            run = PROCESSES.Process(target=run_once, args=(url, str(tmp_path / "archive")))
            run.start()
            await asyncio.to_thread(run.join, 120)
            assert run.exitcode == 0
            assert await store.low_water_mark() == 4000
            return seen + [event.id async for event in reading]

    assert asyncio.run(read_across_a_run()) == whole


def test_a_memory_store_with_archive_reads_as_without(opener: Opener) -> None:
    store = opener("memory://", archive=True)
    store.append("order-1", [NewEvent("Paid", {}), NewEvent("Paid", {})])
    assert [e.position for e in store.read_all(types=["Paid"])] == [1, 2]
    assert [e.version for e in store.read_stream("order-1", backwards=True)] == [2, 1]


def test_personal_fields_archived_sealed_read_opened_and_forgotten_through_the_archive(
    sqlite_url: str, tmp_path: Path, opener: Opener
) -> None:
    from typing import Annotated

    from eventcraft.eventstore import FORGOTTEN, Personal
    from pydantic import BaseModel

    class Registered(BaseModel):
        customer_id: str
        name: Annotated[str, Personal(subject="customer_id")]

    with EventStore.open(sqlite_url) as store:
        for _ in range(3):
            store.append(
                "order-1", [NewEvent("Registered", Registered(customer_id="c7", name="Ann"))]
            )
        assert retention.apply(store, ORDERS, [], str(tmp_path / "archive")).run.removed == 2
    parquet = b"".join(p.read_bytes() for p in (tmp_path / "archive").rglob("*.parquet"))
    assert b"Ann" not in parquet  # sealed in the archive

    store = opener(sqlite_url, archive=True)
    assert [e.data["name"] for e in store.read_stream("order-1")] == ["Ann"] * 3
    sealed = opener(sqlite_url, archive=True, sealed=True)
    assert all("Ann" not in json.dumps(e.data) for e in sealed.read_all())
    store.forget("c7")
    assert [e.data["name"] for e in store.read_all()][:3] == [FORGOTTEN] * 3
