"""An export of a store opened with `archive=` is the whole log: the events retention
archived below the low-water mark, then the table's, in one process or in several; and it
imports as a copy, which an export of the table alone cannot."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from eventcraft.eventstore import EventStore, ImportStopped, NewEvent, export_log, import_log
from eventcraft.eventstore.retention import RetentionPolicy

from eventcraft.operations import retention


def _history(store: EventStore) -> None:
    for n in range(5):
        store.append(
            f"order-{n}",
            [NewEvent("Paid", {"n": n, "k": k}, tags=[f"c:{n}"] if k else []) for k in range(4)],
        )
    store.append("cart-1", [NewEvent("ItemAdded", {}), NewEvent("ItemAdded", {})])
    store.delete_stream("cart-1")


def _documents(text: bytes) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.decode().split("\n") if line]


@pytest.mark.parametrize("jobs", [1, 2])
@pytest.mark.slow
def test_an_export_from_0_holds_the_archived_events_then_the_tables(
    shared_store_url: str, tmp_path: Path, jobs: int
) -> None:
    url = shared_store_url
    with EventStore.open(url) as store:
        _history(store)
        before = io.BytesIO()
        export_log(store, before)
        run = retention.apply(
            store, [RetentionPolicy("order", max_count=1)], [], str(tmp_path / "archive")
        )
        assert run.run.removed == 16
        table = io.BytesIO()
        export_log(store, table)
    assert len(_documents(table.getvalue())) < len(_documents(before.getvalue()))

    with EventStore.open(url, archive=True) as store:
        whole = io.BytesIO()
        report = export_log(store, whole, jobs=jobs)
        part = io.BytesIO()
        export_log(store, part, after=3, until=run.run.up_to - 2, jobs=jobs)
    assert _documents(whole.getvalue()) == _documents(before.getvalue())
    assert report.events == 22 and report.deletions == 1
    events = [d for d in _documents(before.getvalue()) if "position" in d]  # no deletion
    assert _documents(part.getvalue()) == [
        d for d in events if 3 < int(str(d["position"])) <= run.run.up_to - 2
    ]


def test_the_whole_export_imports_as_a_copy_and_the_tables_alone_does_not(
    sqlite_url: str, tmp_path: Path
) -> None:
    with EventStore.open(sqlite_url) as store:
        _history(store)
        original = [(e.id, e.stream_id, e.version, e.data) for e in store.read_all()]
        retention.apply(store, [RetentionPolicy("order", max_count=1)], [], str(tmp_path / "a"))
        table = io.BytesIO()
        export_log(store, table)
    with EventStore.open("memory://") as copy, pytest.raises(ImportStopped):
        import_log(copy, io.BytesIO(table.getvalue()))

    with EventStore.open(sqlite_url, archive=True) as store:
        whole = io.BytesIO()
        export_log(store, whole)
    with EventStore.open("memory://") as copy:
        import_log(copy, io.BytesIO(whole.getvalue()))
        assert [(e.id, e.stream_id, e.version, e.data) for e in copy.read_all()] == original
        assert list(copy.read_stream("cart-1")) == []  # its deletion came along
