"""export and import of deleted streams: a copy hides what the original hides and refuses
what it refuses, on SQLite and PostgreSQL, through the operations and the commands."""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator
from pathlib import Path

import orjson
import psycopg
import pytest
from eventcraft.eventstore import EventStore, NewEvent, StreamTombstoned

from eventcraft.operations import InputError, Problems
from eventcraft.operations.transfer import import_events

from ..conftest import PG_URL
from .conftest import Run, fill
from .transfer_files import exported

REBORN = uuid.UUID(int=100)
"""The event appended to order-1 after its soft deletion."""


@pytest.fixture
def twin_url(shared_store_url: str, tmp_path: Path) -> Iterator[str]:
    """A new, empty store on the backend of `shared_store_url`."""
    if shared_store_url.startswith("sqlite"):
        yield f"sqlite:///{tmp_path / 'copy.db'}"
        return
    schema = f"t_{uuid.uuid4().hex[:12]}"
    yield f"{PG_URL}?schema={schema}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def delete_some(store: EventStore) -> None:
    """On HISTORY: order-1 deleted at 2 and written again, order-2 deleted (soft) at 2,
    shipment-1 tombstoned at 1."""
    store.delete_stream("order-1", 2)
    store.append("order-1", [NewEvent("OrderReopened", {}, id=REBORN)], expected_version=0)
    store.delete_stream("order-2", 2)
    store.delete_stream("shipment-1", 1, tombstone=True)


@pytest.fixture
def deleted_url(shared_store_url: str) -> str:
    """HISTORY with `delete_some`'s deletions, on SQLite and PostgreSQL."""
    with EventStore.open(shared_store_url) as store:
        fill(store)
        delete_some(store)
    return shared_store_url


def assert_deleted_as_the_original(copy: EventStore) -> None:
    """What `delete_some` leaves visible, and refused, holds of `copy`."""
    assert [e.id for e in copy.read_stream("order-1")] == [REBORN]
    assert copy.stream_version("order-1") == 3
    assert list(copy.read_stream("order-2")) == []
    assert copy.stream_version("order-2") == 0
    assert list(copy.read_stream("shipment-1")) == []
    assert [s.stream_id for s in copy.list_streams()] == ["order-1", "payment-1"]
    with pytest.raises(StreamTombstoned):
        copy.append("shipment-1", [NewEvent("ParcelSent", {})])
    deletions = {s: copy.stream_deletion(s) for s in ("order-1", "order-2", "shipment-1")}
    assert {s: (d.version, d.tombstone) for s, d in deletions.items() if d} == {
        "order-1": (2, False),
        "order-2": (2, False),
        "shipment-1": (1, True),
    }
    assert copy.stream_deletion("payment-1") is None
    assert len(list(copy.read_all())) == 7  # the global log keeps every event


def test_an_import_hides_the_deleted_streams_and_keeps_the_tombstones(
    deleted_url: str, twin_url: str
) -> None:
    with EventStore.open(deleted_url) as original, EventStore.open(twin_url) as copy:
        report = import_events(copy, io.BytesIO(exported(original)))
        assert_deleted_as_the_original(copy)
        assert (report.events, report.written, report.deletions) == (7, 7, 3)


def test_an_import_with_deletions_run_again_writes_nothing(deleted_url: str, twin_url: str) -> None:
    with EventStore.open(deleted_url) as original, EventStore.open(twin_url) as copy:
        lines = exported(original)
        import_events(copy, io.BytesIO(lines))
        again = import_events(copy, io.BytesIO(lines))
        assert (again.written, again.skipped, again.deletions) == (0, 7, 0)
        unchecked = import_events(copy, io.BytesIO(lines), check=False)
        assert (unchecked.written, unchecked.skipped, unchecked.deletions) == (0, 7, 0)
        assert_deleted_as_the_original(copy)
        assert exported(copy).count(b"\n") == lines.count(b"\n")


def test_an_unchecked_import_applies_the_deletions_as_it_goes(
    deleted_url: str, twin_url: str
) -> None:
    with EventStore.open(deleted_url) as original, EventStore.open(twin_url) as copy:
        report = import_events(copy, io.BytesIO(exported(original)), check=False)
        assert (report.written, report.deletions) == (7, 3)
        assert_deleted_as_the_original(copy)


def test_a_copy_exports_the_same_documents_and_times_but_positions(
    deleted_url: str, twin_url: str
) -> None:
    def documents(store: EventStore) -> list[dict[str, object]]:
        found = [orjson.loads(line) for line in exported(store).splitlines()]
        for document in found:
            document.pop("position", None)
        return found

    with EventStore.open(deleted_url) as original, EventStore.open(twin_url) as copy:
        import_events(copy, io.BytesIO(exported(original)))
        assert documents(copy) == documents(original)
        deletions = [
            {k: v for k, v in d.items() if k != "deleted_at"}
            for d in documents(original)
            if "deletion" in d
        ]
        assert deletions == [
            {"deletion": "soft", "stream_id": "order-1", "version": 2},
            {"deletion": "tombstone", "stream_id": "shipment-1", "version": 1},
            {"deletion": "soft", "stream_id": "order-2", "version": 2},
        ]


def test_a_shared_export_carries_the_deletions_too(deleted_url: str) -> None:
    with EventStore.open(deleted_url) as original:
        assert exported(original, jobs=2) == exported(original)


def test_a_deletion_goes_with_the_export_holding_its_streams_event_at_that_version(
    deleted_url: str, twin_url: str
) -> None:
    def deleted(lines: bytes) -> list[str]:
        documents = [orjson.loads(line) for line in lines.splitlines()]
        return [d["stream_id"] for d in documents if "deletion" in d]

    with EventStore.open(deleted_url) as original, EventStore.open(twin_url) as copy:
        # order-2 was deleted at version 2, position 6; the others at positions 3 and 5.
        before, after = exported(original, until=5), exported(original, after=5)
        assert (deleted(before), deleted(after)) == (["order-1", "shipment-1"], ["order-2"])
        import_events(copy, io.BytesIO(before))
        import_events(copy, io.BytesIO(after))  # order-1 goes on at 3 after its deletion
        assert_deleted_as_the_original(copy)


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_stream_deleted_before_its_first_event_is_copied_from_the_top(
    shared_store_url: str, twin_url: str, jobs: int
) -> None:
    with EventStore.open(shared_store_url) as original, EventStore.open(twin_url) as copy:
        original.delete_stream("cart-9", tombstone=True)  # never written, and never will be
        lines = exported(original, jobs=jobs)  # a log without events
        assert [orjson.loads(line)["stream_id"] for line in lines.splitlines()] == ["cart-9"]
        events = len(fill(original))
        lines = exported(original, jobs=jobs)
        assert b'"stream_id":"cart-9"' in lines.splitlines()[0]
        assert b"cart-9" not in exported(original, after=1)  # not at an event after 1
        report = import_events(copy, io.BytesIO(lines))
        assert (report.written, report.deletions) == (events, 1)
        assert copy.stream_deletion("cart-9") == original.stream_deletion("cart-9")
        with pytest.raises(StreamTombstoned):
            copy.append("cart-9", [NewEvent("ItemAdded", {})])
        assert import_events(copy, io.BytesIO(lines)).deletions == 0  # run again


def test_a_deletion_record_out_of_place_is_one_error_naming_its_line(
    deleted_url: str, twin_url: str
) -> None:
    with EventStore.open(deleted_url) as original, EventStore.open(twin_url) as copy:
        lines = exported(original).splitlines(keepends=True)
        tombstone = next(n for n, line in enumerate(lines) if b'"tombstone"' in line)
        parcel = next(line for line in lines if b'"ParcelSent"' in line)
        written_after = [*lines, parcel.replace(b'"version":1}', b'"version":2}')]
        wrong_version = [*lines]
        wrong_version[tombstone] = lines[tombstone].replace(b'"version":1}', b'"version":3}')
        for bad, message in [
            (
                written_after,
                rf"line {len(lines) + 1}: 'shipment-1' .*tombstoned .*line {tombstone + 1}",
            ),
            (wrong_version, rf"line {tombstone + 1}: .*'shipment-1' at version 3"),
            ([b'{"deletion":"hard","stream_id":"a-1","version":1}\n'], "line 1: deletion"),
        ]:
            with pytest.raises(InputError, match=message):
                import_events(copy, io.BytesIO(b"".join(bad)))
            assert copy.high_water_mark() == 0


def test_an_import_into_a_store_that_deleted_a_stream_otherwise_is_refused(
    deleted_url: str, twin_url: str
) -> None:
    with EventStore.open(deleted_url) as original, EventStore.open(twin_url) as copy:
        lines = exported(original)
        shipment = [NewEvent("ParcelSent", {"order": "order-1"}, id=uuid.UUID(int=5))]
        copy.append("shipment-1", [*shipment, NewEvent("ParcelLost", {})])
        copy.delete_stream("shipment-1")  # soft and at 2, where the file tombstones it at 1
        with pytest.raises(
            Problems,
            match=r"^line 7: shipment-1 is at version 0 in the store, the file deletes it at "
            r"version 1 \(the store deleted it at version 2\); it is not a copy",
        ):
            import_events(copy, io.BytesIO(lines))
        assert copy.stream_deletion("shipment-1").tombstone is False  # type: ignore[union-attr]


def test_a_soft_deletion_in_the_store_becomes_the_files_tombstone(
    deleted_url: str, twin_url: str
) -> None:
    with EventStore.open(deleted_url) as original, EventStore.open(twin_url) as copy:
        lines = exported(original)
        before_tombstone = b"".join(lines.splitlines(keepends=True)[:6])  # line 7 is it
        import_events(copy, io.BytesIO(before_tombstone))
        copy.delete_stream("shipment-1", 1)  # soft: the file's tombstone is one step on
        report = import_events(copy, io.BytesIO(lines))
        assert (report.written, report.skipped, report.deletions) == (2, 5, 2)
        assert_deleted_as_the_original(copy)


# --- the commands --------------------------------------------------------------------


def test_export_and_import_commands_copy_the_deletions(
    run: Run, deleted_url: str, twin_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "events.ndjson"
    assert run("--store", deleted_url, "export", "--out", str(path)).code == 0
    done = run("--store", twin_url, "import", str(path), "--json")
    assert done.code == 0, done.err
    with EventStore.open(twin_url) as copy:
        assert_deleted_as_the_original(copy)
    assert orjson.loads(done.out) == {"events": 7, "written": 7, "skipped": 0, "deletions": 3}
    assert run("--store", twin_url, "verify").code == 0
    again = run("--store", twin_url, "import", str(path), "--yes", "--no-check", "--json")
    assert orjson.loads(again.out) == {"events": 7, "written": 0, "skipped": 7, "deletions": 0}


def test_text_holding_unicode_line_separators_is_exported_with_the_deletions_and_copied_whole(
    deleted_url: str, twin_url: str
) -> None:
    """JSON keeps U+2028, U+2029 and U+0085 raw inside strings: only a newline ends a line."""
    note = "first\u2028second\u2029third\x85fourth\x1cfifth"
    with EventStore.open(deleted_url) as original, EventStore.open(twin_url) as copy:
        original.append("note-1", [NewEvent("Noted", {"text": note}, {"why": note})])
        lines = exported(original)
        import_events(copy, io.BytesIO(lines))
        (noted,) = copy.read_stream("note-1")
        assert noted.data == {"text": note} and noted.metadata["why"] == note
        deletions = {s: copy.stream_deletion(s) for s in ("order-1", "order-2", "shipment-1")}
        assert {s: (d.version, d.tombstone) for s, d in deletions.items() if d} == {
            "order-1": (2, False),
            "order-2": (2, False),
            "shipment-1": (1, True),
        }
