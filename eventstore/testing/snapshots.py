"""The snapshot part of the conformance suite; `EventStoreConformance` includes it."""

from __future__ import annotations

from datetime import timedelta

import pytest

from ..errors import InvalidEvent
from ..events import NewEvent
from ..store import EventStore


def _append(store: EventStore, stream_id: str, count: int) -> None:
    store.append(stream_id, [NewEvent("E", {"n": n}) for n in range(count)])


class SnapshotConformance:
    """Snapshots: the newest per stream, kept outside the log."""

    def test_a_stream_without_a_snapshot_has_none(self, store: EventStore) -> None:
        _append(store, "account-1", 1)
        assert store.load_snapshot("account-1") is None
        assert store.load_snapshot("account-2") is None

    def test_a_saved_snapshot_loads_as_saved(self, store: EventStore) -> None:
        _append(store, "account-1", 3)
        store.save_snapshot(
            "account-1", version=2, type="Account", schema_version=4, data={"balance": 7}
        )
        snapshot = store.load_snapshot("account-1")
        assert snapshot is not None
        assert (snapshot.stream_id, snapshot.version, snapshot.type) == ("account-1", 2, "Account")
        assert (snapshot.schema_version, snapshot.data) == (4, {"balance": 7})
        assert snapshot.recorded_at.utcoffset() == timedelta(0)

    def test_snapshots_stay_out_of_the_log(self, store: EventStore) -> None:
        _append(store, "account-1", 2)
        head = store.high_water_mark()
        store.save_snapshot("account-1", version=2, type="Account", data={})
        assert store.high_water_mark() == head
        assert [e.type for e in store.read_all()] == ["E", "E"]
        assert store.stream_version("account-1") == 2

    def test_a_newer_snapshot_replaces_an_older_one_and_not_the_reverse(
        self, store: EventStore
    ) -> None:
        _append(store, "account-1", 5)
        store.save_snapshot("account-1", version=3, type="Account", data={"v": 3})
        store.save_snapshot("account-1", version=5, type="Account", data={"v": 5})
        store.save_snapshot("account-1", version=4, type="Account", data={"v": 4})
        snapshot = store.load_snapshot("account-1")
        assert snapshot is not None and snapshot.data == {"v": 5}
        # The same version again replaces it: the state's schema may have changed.
        store.save_snapshot("account-1", version=5, type="Account", schema_version=2, data={})
        snapshot = store.load_snapshot("account-1")
        assert snapshot is not None and snapshot.schema_version == 2

    def test_a_snapshot_beyond_the_stream_is_refused(self, store: EventStore) -> None:
        _append(store, "account-1", 2)
        with pytest.raises(InvalidEvent, match=r"version 3, but the stream is at version 2"):
            store.save_snapshot("account-1", version=3, type="Account", data={})
        with pytest.raises(InvalidEvent, match=r"'account-9' at version 1, .* at version 0"):
            store.save_snapshot("account-9", version=1, type="Account", data={})
        assert store.load_snapshot("account-1") is None

    @pytest.mark.parametrize(
        "change",
        [
            {"version": 0},
            {"version": True},
            {"schema_version": 0},
            {"type": ""},
            {"data": {"bad": object()}},
            {"data": ["not", "an", "object"]},
        ],
    )
    def test_an_unusable_snapshot_is_refused_and_nothing_is_kept(
        self, store: EventStore, change: dict[str, object]
    ) -> None:
        _append(store, "account-1", 1)
        arguments: dict[str, object] = {"version": 1, "type": "Account", "data": {}}
        with pytest.raises(InvalidEvent, match="'account-1'"):
            store.save_snapshot("account-1", **{**arguments, **change})  # type: ignore[arg-type]
        assert store.load_snapshot("account-1") is None
