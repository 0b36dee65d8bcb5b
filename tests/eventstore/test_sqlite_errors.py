"""What a SQLite store says when SQLite itself fails mid-write: the error that happened,
not one from cleaning up after it, and a store that goes on once the cause is gone."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from eventcraft.eventstore import EventStore, NewEvent, StoreUnavailable


def _full(store: EventStore) -> None:
    """As if the disk were full: the file may grow by two pages, no more."""
    conn = store._backend._conn  # type: ignore[attr-defined]
    (pages,) = conn.execute("PRAGMA page_count").fetchone()
    conn.execute(f"PRAGMA max_page_count = {pages + 2}")


def _room(store: EventStore) -> None:
    store._backend._conn.execute("PRAGMA max_page_count = 1073741823")  # type: ignore[attr-defined]


@pytest.mark.parametrize("grouped", [True, False])
def test_an_append_on_a_full_disk_says_so_and_the_store_goes_on(
    tmp_path: Path, grouped: bool
) -> None:
    big = {"pad": "x" * 3000}  # a page of its own
    with EventStore.open(f"sqlite:///{tmp_path / 'events.db'}", group_commit=grouped) as store:
        store.append("warm-1", [NewEvent("E", {})])
        _full(store)
        taken: list[int] = []
        errors: list[BaseException] = []

        def append(n: int) -> None:
            try:
                taken.extend(store.append(f"s-{n}", [NewEvent("E", big)]).positions)
            except StoreUnavailable as error:
                errors.append(error)

        threads = [threading.Thread(target=append, args=(n,)) for n in range(20)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors and len(taken) + len(errors) == 20
        assert all(str(error).endswith("database or disk is full") for error in errors), errors
        _room(store)
        after = store.append("after-1", [NewEvent("E", big)]).positions
        assert [e.position for e in store.read_all()] == [1, *sorted(taken), *after]


def test_a_deletion_on_a_full_disk_says_so_and_the_store_goes_on(tmp_path: Path) -> None:
    names = [f"order-{n}-{'x' * 240}" for n in range(80)]  # a deletion keeps the name
    with EventStore.open(f"sqlite:///{tmp_path / 'events.db'}") as store:
        for name in names:
            store.append(name, [NewEvent("Placed", {})])
        _full(store)
        with pytest.raises(StoreUnavailable, match=r"database or disk is full$"):
            for name in names:
                store.delete_stream(name, tombstone=True)
        _room(store)
        for name in names:
            if store.stream_version(name):  # the one refused, and those after it
                store.delete_stream(name, tombstone=True)
        assert [store.stream_version(name) for name in names] == [0] * 80
