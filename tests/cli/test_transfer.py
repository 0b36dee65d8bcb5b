"""export and import: as operations on every backend, and round trips between stores
(the commands' files, pipes and exit codes: test_transfer_commands.py)."""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import psycopg
import pytest
from eventcraft.eventstore import EventStore, NewEvent, Query, QueryItem
from eventcraft.eventstore.retention import RetentionPolicy

from eventcraft.operations import Problems, retention
from eventcraft.operations.transfer import import_events

from ..conftest import PG_URL, _need_postgres
from .conftest import HISTORY, TAGS, Run, fill
from .transfer_files import exported, without_positions


@pytest.fixture
def copy_url(tmp_path: Path) -> str:
    """A new SQLite store beside the `known` one (which may be SQLite too)."""
    return f"sqlite:///{tmp_path / 'copy.db'}"


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def target_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A new store on each backend in turn, apart from the `known` one."""
    if request.param == "memory":
        yield "memory://"
    elif request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'target.db'}"
    else:
        _need_postgres()
        schema = f"t_{uuid.uuid4().hex[:12]}"
        yield f"{PG_URL}?schema={schema}"
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def test_an_export_holds_every_event_with_every_field(known: EventStore) -> None:
    lines = exported(known).splitlines()
    assert len(lines) == len(HISTORY)
    first = orjson.loads(lines[0])
    fields = ["position", "id", "stream_id", "version", "type", "recorded_at", "data"]
    assert sorted(first) == sorted([*fields, "metadata", "tags"])
    assert [(d["stream_id"], d["type"], d["data"]) for d in map(orjson.loads, lines)] == [
        (stream, type_, data) for stream, type_, data, _, _ in HISTORY
    ]
    assert [tuple(orjson.loads(line)["tags"]) for line in lines] == TAGS


def test_an_export_takes_a_range_of_positions_and_categories(known: EventStore) -> None:
    positions = [e.position for e in known.read_all()]
    part = [
        orjson.loads(line)
        for line in exported(known, after=positions[1], until=positions[4]).splitlines()
    ]
    assert [d["position"] for d in part] == positions[2:5]
    orders = [orjson.loads(line) for line in exported(known, categories=["order"]).splitlines()]
    assert {d["stream_id"] for d in orders} == {"order-1", "order-2"}


def test_an_import_copies_ids_versions_data_and_times(known: EventStore, copy_url: str) -> None:
    original = exported(known)
    with EventStore.open(copy_url) as copy:
        report = import_events(copy, io.BytesIO(original))
        assert (report.events, report.written, report.skipped) == (6, 6, 0)
        assert without_positions(exported(copy)) == without_positions(original)
        assert [e.stream_id for e in copy.read_all()] == [e.stream_id for e in known.read_all()]


def test_an_import_into_every_backend_keeps_the_tags_and_queries_find_them(
    known: EventStore, target_url: str
) -> None:
    original = exported(known)
    with EventStore.open(target_url) as copy:
        report = import_events(copy, io.BytesIO(original))
        assert (report.events, report.written) == (6, 6)
        assert without_positions(exported(copy)) == without_positions(original)
        assert [e.tags for e in copy.read_all()] == TAGS
        bob = copy.read_query(Query([QueryItem(tags=["customer:bob"])])).events
        assert [e.type for e in bob] == ["OrderPlaced", "OrderCancelled"]


def test_a_file_exported_before_events_had_tags_imports_as_untagged_events(
    known: EventStore, copy_url: str
) -> None:
    documents = [orjson.loads(line) for line in exported(known).splitlines()]
    for document in documents:
        del document["tags"]
    old = b"".join(orjson.dumps(document) + b"\n" for document in documents)
    with EventStore.open(copy_url) as copy:
        assert import_events(copy, io.BytesIO(old)).written == 6
        assert [e.tags for e in copy.read_all()] == [()] * 6
        assert [e.data for e in copy.read_all()] == [data for _, _, data, _, _ in HISTORY]


def test_an_import_run_twice_writes_nothing_the_second_time(
    known: EventStore, store_url: str
) -> None:
    original = exported(known)
    with EventStore.open(store_url) as copy:
        import_events(copy, io.BytesIO(original))
        head = copy.high_water_mark()
        again = import_events(copy, io.BytesIO(original))
        assert (again.written, again.skipped) == (0, 6)
        assert copy.high_water_mark() == head


def test_an_import_resumes_where_the_store_stops(known: EventStore, copy_url: str) -> None:
    lines = exported(known).splitlines(keepends=True)
    with EventStore.open(copy_url) as copy:
        import_events(copy, io.BytesIO(b"".join(lines[:3])))
        # A later export holds what was imported and more: its batches have other bounds.
        known.append("order-1", [NewEvent("OrderNoted", {"note": "late"})])
        report = import_events(copy, io.BytesIO(exported(known)))
        assert (report.written, report.skipped) == (4, 3)
        assert without_positions(exported(copy)) == without_positions(exported(known))


def test_an_import_into_a_store_with_other_events_at_those_versions_is_refused(
    known: EventStore, copy_url: str
) -> None:
    with EventStore.open(copy_url) as other:
        other.append("order-1", [NewEvent("OrderPlaced", {})])
        with pytest.raises(
            Problems,
            match=r"line 1: the store holds another event at order-1 version 1",
        ):
            import_events(other, io.BytesIO(exported(known)))


def test_an_import_of_a_stream_begun_part_way_is_refused(known: EventStore, copy_url: str) -> None:
    tail = exported(known, after=known.high_water_mark() - 1)
    with EventStore.open(copy_url) as copy, pytest.raises(Problems, match=r"line 1: .*part-way"):
        import_events(copy, io.BytesIO(tail))


def test_an_import_of_an_export_of_a_retained_store_says_it_cannot_be_a_copy(
    shared_store_url: str, copy_url: str, tmp_path: Path
) -> None:
    with EventStore.open(shared_store_url) as source:
        long_ago = datetime.now(UTC) - timedelta(days=400)
        source.append("audit-1", [NewEvent("Seen", {}, recorded_at=long_ago) for _ in range(5)])
        policy = RetentionPolicy("audit", max_age=timedelta(days=365))
        retention.apply(source, [policy], [], str(tmp_path / "archive"))
        lines = exported(source)
    with EventStore.open(copy_url) as copy:
        with pytest.raises(
            Problems,
            match=r"^line 1: audit-1 version 5 cannot follow version 0 in the store: .*from a "
            r"store whose early events were removed by retention, it cannot be imported as a "
            r"copy",
        ):
            import_events(copy, io.BytesIO(lines))
        assert copy.high_water_mark() == 0


def test_an_import_reaching_a_tombstoned_stream_names_its_line_and_keeps_the_lines_before(
    known: EventStore, copy_url: str
) -> None:
    with EventStore.open(copy_url) as copy:
        copy.append("order-2", [NewEvent("OrderPlaced", {})])
        copy.delete_stream("order-2", tombstone=True)
        with pytest.raises(
            Problems,
            match=r"^line 4: order-2 is tombstoned in the store: .*the lines before this one "
            r"were imported, nothing from this line on was$",
        ):
            import_events(copy, io.BytesIO(exported(known)))
        versions = {s: copy.stream_version(s) for s in ("order-1", "payment-1", "shipment-1")}
        assert versions == {"order-1": 2, "payment-1": 1, "shipment-1": 0}


# --- the commands --------------------------------------------------------------------


def test_the_round_trip_sqlite_postgres_exports_the_same_documents_but_positions(
    run: Run, sqlite_url: str, pg_url: str, tmp_path: Path
) -> None:
    with EventStore.open(sqlite_url) as source:
        fill(source)
        # Keys in an order PostgreSQL's jsonb would change, and a time it must keep.
        source.append("order-3", [NewEvent("OrderPlaced", {"zeta": 1, "a": {"yy": 2, "b": 3}})])
    first, second = tmp_path / "first.ndjson", tmp_path / "second.ndjson"
    assert run("--store", sqlite_url, "export", "--out", str(first)).code == 0
    imported = run("--store", pg_url, "import", str(first))
    assert imported.code == 0, imported.err
    assert "7 written" in imported.out
    assert run("--store", pg_url, "export", "--out", str(second)).code == 0

    assert without_positions(first.read_bytes()) == without_positions(second.read_bytes())
    assert b'"data":{"a": {"b": 3, "yy": 2}, "zeta": 1}' in second.read_bytes()  # jsonb's form


def test_a_round_trip_through_a_store_of_the_same_backend_exports_the_same_bytes(
    target_url: str,
) -> None:
    """Through another backend the documents are equal (the test above); through the same
    backend, the file itself: every field, data's bytes and the positions too."""
    with EventStore.open(target_url) as source:
        fill(source)
        source.append("order-3", [NewEvent("OrderPlaced", {"zeta": 1.5, "a": {"yy": [], "b": 3}})])
        first = exported(source)
        copy_url = target_url
        if target_url.startswith("postgresql"):
            copy_url = target_url.replace("?schema=", "?schema=copy_")
        elif target_url.startswith("sqlite"):
            copy_url = target_url.replace("target.db", "copy.db")
        with EventStore.open(copy_url) as copy:
            try:
                import_events(copy, io.BytesIO(first))
                assert exported(copy) == first
            finally:
                if copy_url.startswith("postgresql"):
                    schema = copy_url.split("?schema=", 1)[1]
                    with psycopg.connect(PG_URL, autocommit=True) as conn:
                        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def test_an_export_of_one_store_is_the_same_bytes_each_time(known: EventStore) -> None:
    assert exported(known) == exported(known)
    for line in exported(known).splitlines():
        keys = list(orjson.loads(line))
        assert keys == sorted(keys)


def test_names_that_need_escaping_export_as_json_and_import_back(target_url: str) -> None:
    names = ['order-"quoted"', "order-back\\slash", "order-é✓"]
    with EventStore.open(target_url) as store:
        for name in names:
            store.append(name, [NewEvent('Said "hi"\\', {"text": 'a "b" \\ \n'}, tags=['t:"x"'])])
        lines = exported(store)
    documents = [orjson.loads(line) for line in lines.splitlines()]
    assert [(d["stream_id"], d["type"], d["tags"]) for d in documents] == [
        (name, 'Said "hi"\\', ['t:"x"']) for name in names
    ]
    assert all(d["data"] == {"text": 'a "b" \\ \n'} for d in documents)
    with EventStore.open("memory://") as copy:
        import_events(copy, io.BytesIO(lines))
        assert [e.stream_id for e in copy.read_all()] == names
