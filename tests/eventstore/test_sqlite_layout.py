"""What the SQLite store writes and how it reads it: ids of 16 bytes, reads that walk an
index, and a durability the URL can choose (issue 26)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from eventcraft.eventstore import EventStore, NewEvent, UnsupportedStoreURL
from eventcraft.eventstore.sql import schema
from eventcraft.eventstore.sqlite import statements as sql


def test_sqlite_stores_each_id_in_16_bytes(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    with EventStore.open(f"sqlite:///{path}") as store:
        event = NewEvent("Placed", {})
        store.append("order-1", [event])
    with sqlite3.connect(path) as conn:
        row = conn.execute(f"SELECT typeof(id), id FROM {schema.EVENTS}").fetchone()
    assert row == ("blob", event.id.bytes)


@pytest.mark.parametrize(
    ("categories", "types"),
    [
        (["order"], None),
        (["order", "invoice"], None),
        (None, ["Placed", "Paid"]),
        (["order", "invoice"], ["Placed"]),
    ],
)
def test_reads_by_category_or_type_on_sqlite_walk_an_index_a_page_at_a_time(
    tmp_path: Path, categories: list[str] | None, types: list[str] | None
) -> None:
    """With `IN (...)` SQLite sorted every matching row past the start for each page."""
    path = tmp_path / "events.db"
    with EventStore.open(f"sqlite:///{path}") as store:
        store.append("order-1", [NewEvent("Placed", {}), NewEvent("Paid", {})])
        store.append("invoice-1", [NewEvent("Placed", {})])
        expected = [
            e.position
            for e in store.read_all()
            if (categories is None or e.category in categories)
            and (types is None or e.type in types)
        ]
        assert [e.position for e in store.read_all(categories=categories, types=types)] == (
            expected
        )
    query, params = sql.read_all_query(10**9, categories, types)
    with sqlite3.connect(path) as conn:
        plan = conn.execute(f"EXPLAIN QUERY PLAN {query}", {**params, "start": 0, "count": 1000})
        steps: list[tuple[Any, ...]] = plan.fetchall()
    searches = [detail for _, _, _, detail in steps if schema.EVENTS in detail]
    index = "category_position" if categories is not None else "type_position"
    assert searches and all(f"USING INDEX {schema.EVENTS}_{index}" in s for s in searches)
    assert not [detail for _, parent, _, detail in steps if parent == 0 and "TEMP B-TREE" in detail]


def _synchronous(store: EventStore) -> int:
    conn: sqlite3.Connection = store._backend._conn  # type: ignore[attr-defined]
    return int(conn.execute("PRAGMA synchronous").fetchone()[0])


def test_a_sqlite_store_syncs_every_commit_unless_its_url_says_normal(tmp_path: Path) -> None:
    with EventStore.open(f"sqlite:///{tmp_path / 'a.db'}") as store:
        assert _synchronous(store) == 2  # FULL: an append that returned survives a power cut
    with EventStore.open(f"sqlite:///{tmp_path / 'b.db'}?synchronous=NORMAL") as store:
        assert _synchronous(store) == 1
        store.append("order-1", [NewEvent("Placed", {})])
        assert store.high_water_mark() == 1


@pytest.mark.parametrize("value", ["off", "", "2", "fast"])
def test_a_sqlite_url_with_another_synchronous_is_refused_before_any_file_is_made(
    tmp_path: Path, value: str
) -> None:
    with pytest.raises(UnsupportedStoreURL, match="synchronous must be one of full, normal"):
        EventStore.open(f"sqlite:///{tmp_path / 'db' / 'events.db'}?synchronous={value}")
    assert not (tmp_path / "db").exists()


def test_a_sqlite_store_opens_again_while_another_connection_writes_its_file(
    tmp_path: Path,
) -> None:
    # A tenant's store is closed and opened again as tenants take turns, while its
    # runner writes read models in the same file: opening a store whose schema is
    # there already must not wait for that writer (a minute's busy timeout).
    url = f"sqlite:///{tmp_path}/events.db"
    EventStore.open(url).close()
    writer = sqlite3.connect(tmp_path / "events.db", isolation_level=None, timeout=0)
    try:
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("CREATE TABLE totals (cents INTEGER)")
        with EventStore.open(url) as store:
            assert store.high_water_mark() == 0
        writer.execute("COMMIT")
    finally:
        writer.close()
