"""The store's own export, import and verification, through its public face: a log
copied to another store through its lines, a file at fault or a store that contradicts
it refused with the store's errors, and a log checked with its readers' checkpoints.
(The shell's commands over them, their files and exit codes: tests/cli.)"""

from __future__ import annotations

import io
from pathlib import Path

import orjson
import pytest
from eventcraft.eventstore import (
    BadImportLine,
    EventStore,
    EventStoreError,
    ImportStopped,
    InvalidEvent,
    NewEvent,
    checked_import,
    export_lines,
    export_log,
    import_log,
    verify_log,
)


def _filled(store: EventStore) -> None:
    store.append("order-1", [NewEvent("Placed", {"n": 1}, tags=("customer:c1",))])
    store.append("order-2", [NewEvent("Placed", {"n": 2}), NewEvent("Paid", {"n": 2})])
    store.append("order-1", [NewEvent("Paid", {"n": 1})])
    store.delete_stream("order-2", 2)


def _lines(store: EventStore) -> list[dict[str, object]]:
    out = io.BytesIO()
    export_log(store, out)
    documents = [orjson.loads(line) for line in out.getvalue().splitlines()]
    for document in documents:
        document.pop("position", None)
    return documents


def test_a_log_exported_and_imported_elsewhere_is_the_same_log(
    store: EventStore, tmp_path: Path
) -> None:
    _filled(store)
    out = io.BytesIO()
    exported = export_log(store, out)
    assert (exported.events, exported.deletions) == (4, 1)
    with EventStore.open(f"sqlite:///{tmp_path / 'copy.db'}") as copy:
        imported = import_log(copy, io.BytesIO(out.getvalue()))
        assert (imported.events, imported.written, imported.skipped) == (4, 4, 0)
        assert imported.deletions == 1
        assert _lines(copy) == _lines(store)
        again = import_log(copy, io.BytesIO(out.getvalue()))
        assert (again.written, again.skipped, again.deletions) == (0, 4, 0)


def test_export_lines_are_the_chunks_export_log_writes(store: EventStore) -> None:
    _filled(store)
    out = io.BytesIO()
    export_log(store, out, after=1)
    assert "".join(text for text, _, _ in export_lines(store, after=1)).encode() == (out.getvalue())


def test_a_line_at_fault_is_a_bad_import_line_and_nothing_is_written(
    store: EventStore,
) -> None:
    source = io.BytesIO(b"\n{not json}\n")
    with pytest.raises(BadImportLine, match=r"^line 2: not JSON: .*nothing was imported$"):
        import_log(store, source)
    assert store.log_status().head == 0
    assert issubclass(BadImportLine, InvalidEvent)  # the caller's input, a ValueError


def test_a_file_is_checked_whole_before_the_store_is_opened() -> None:
    good = orjson.dumps(
        {
            "position": 1,
            "id": "00000000-0000-0000-0000-000000000001",
            "stream_id": "order-1",
            "version": 2,
            "type": "Placed",
            "recorded_at": "2024-01-01T00:00:00+00:00",
            "data": {},
            "metadata": {},
        }
    )
    repeated = good + b"\n" + good + b"\n"  # version 2 twice
    refused = pytest.raises(BadImportLine, match=r"^line 2: 'order-1' version 2 does not follow")
    with refused, checked_import(io.BytesIO(repeated)):
        pass


def test_an_import_the_store_contradicts_is_stopped(store: EventStore) -> None:
    line = orjson.dumps(
        {
            "position": 1,
            "id": "00000000-0000-0000-0000-000000000001",
            "stream_id": "order-1",
            "version": 1,
            "type": "Placed",
            "recorded_at": "2024-01-01T00:00:00+00:00",
            "data": {},
            "metadata": {},
        }
    )
    store.append("order-1", [NewEvent("Placed", {})])  # another event at version 1
    with pytest.raises(ImportStopped, match=r"^line 1: the store holds another event"):
        import_log(store, io.BytesIO(line + b"\n"))
    assert issubclass(ImportStopped, EventStoreError)
    assert not issubclass(ImportStopped, ValueError)  # found by the store, not the caller's


def test_an_export_in_jobs_needs_a_store_other_processes_can_open() -> None:
    with EventStore.open("memory://") as store:
        with pytest.raises(InvalidEvent, match="other processes can open"):
            export_log(store, io.BytesIO(), jobs=2)
        with pytest.raises(InvalidEvent, match="before its start"):
            export_log(store, io.BytesIO(), after=5, until=2)


def test_verify_log_checks_the_checkpoints_it_is_given(store: EventStore) -> None:
    _filled(store)
    alone = verify_log(store)
    assert alone.ok and alone.checkpoints is None
    assert (alone.events, alone.streams, alone.high_water_mark) == (4, 2, 4)
    found = verify_log(store, checkpoints=lambda: {"reader": 4, "ahead": 99})
    assert found.checkpoints == 2 and found.problem_count == 1
    assert [(p.kind, p.where) for p in found.problems] == [("checkpoint ahead", "ahead")]
