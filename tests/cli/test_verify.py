"""verify: a sound store on every backend, and each kind of problem, made by writing into a
SQLite store's tables behind the store's back."""

from __future__ import annotations

import sqlite3
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest
import sqlalchemy as sa
from eventcraft.eventstore import EventStore, NewEvent
from eventcraft.eventstore.retention import RetentionPolicy, Truncation
from eventcraft.projections import Projection
from eventcraft.projections.schema import checkpoints

from eventcraft import App
from eventcraft.operations import retention
from eventcraft.operations.verify import verify

from .conftest import Run, fill

app = App(projections=[Projection("verify-orders", tables=[])])
"""The App `--app tests.cli.test_verify:app` loads: one projection, whose checkpoint a
test puts past the log."""


def test_a_sound_store_verifies_on_every_backend(known: EventStore) -> None:
    known.save_snapshot("order-1", version=2, type="Order", data={"paid": True})
    found = verify(known)
    assert found.ok and found.problems == [] and found.problem_count == 0
    assert (found.events, found.streams, found.snapshots) == (6, 4, 1)
    assert found.high_water_mark == known.high_water_mark()
    assert found.checkpoints is None


def test_verify_with_an_app_checks_its_projections(known: EventStore) -> None:
    found = verify(known, app)
    assert found.ok and found.checkpoints == 0  # none has run: no checkpoint to check


def tampered(path: Path) -> sqlite3.Connection:
    """A connection to the store's file with its append-only triggers and its constraints
    gone: the events table rebuilt without keys, as a damaged copy might be."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript(
        """
        DROP TRIGGER eventcraft_events_no_update;
        DROP TRIGGER eventcraft_events_no_delete;
        CREATE TABLE loose AS SELECT * FROM eventcraft_events;
        DROP TABLE eventcraft_events;
        ALTER TABLE loose RENAME TO eventcraft_events;
        """
    )
    return conn


@pytest.fixture
def broken(tmp_path: Path) -> str:
    """A SQLite store with one problem of each kind the log can have."""
    path = tmp_path / "events.db"
    url = f"sqlite:///{path}"
    with EventStore.open(url) as store:
        fill(store)
        store.save_snapshot("order-2", version=2, type="Order", data={})
    conn = tampered(path)
    insert = (
        "INSERT INTO eventcraft_events (position, stream_id, version, id, type, data, "
        "metadata, recorded_at, category, tags) SELECT ?, stream_id, ?, coalesce(?, id), "
        "type, data, metadata, recorded_at, category, tags FROM eventcraft_events "
        "WHERE position = ?"
    )
    conn.execute("UPDATE eventcraft_events SET version = 3 WHERE position = 3")  # order-1: 1, 3
    conn.execute(insert, (7, 1, None, 4))  # order-2 v1 again, with its id
    conn.execute(insert, (7, 9, "f" * 32, 5))  # position 7 twice; shipment-1 v9: a gap
    conn.execute("UPDATE eventcraft_snapshots SET version = 5 WHERE stream_id = 'order-2'")
    engine = sa.create_engine(url)
    checkpoints.create(engine)
    with engine.begin() as connection:
        connection.execute(
            sa.insert(checkpoints).values(
                name="verify-orders",
                position=99,
                generation=1,
                next_generation=2,
                updated_at=time.time(),
            )
        )
    engine.dispose()
    conn.close()
    return url


def test_verify_finds_each_kind_of_problem(broken: str) -> None:
    with EventStore.open(broken) as store:
        found = verify(store, app)
    assert not found.ok
    assert [(p.kind, p.where) for p in found.problems] == [
        ("version gap", "order-1"),
        ("duplicate id", "position 7"),
        ("version repeated", "order-2"),
        ("position order", "position 7"),
        ("version gap", "shipment-1"),
        ("snapshot ahead", "order-2"),
        ("checkpoint ahead", "verify-orders"),
    ]
    assert found.problem_count == 7
    assert "version 3 (position 3) follows version 1: version 2 missing" in found.problems[0].detail
    assert "versions 2 to 8 missing" in found.problems[4].detail


def test_the_command_lists_the_problems_and_exits_1(run: Run, broken: str) -> None:
    outcome = run("--store", broken, "--app", "tests.cli.test_verify:app", "verify")
    assert outcome.code == 1
    assert "version gap" in outcome.out and "checkpoint ahead" in outcome.out
    assert outcome.err == "error: verify found 7 problems\n"


def test_the_command_prints_the_problems_as_json(run: Run, broken: str) -> None:
    outcome = run("--store", broken, "verify", "--json")
    assert outcome.code == 1
    document = orjson.loads(outcome.out)
    assert document["problem_count"] == 6 and document["projections"] is None
    assert document["problems"][0] == {
        "kind": "version gap",
        "where": "order-1",
        "detail": "version 3 (position 3) follows version 1: version 2 missing",
    }


def test_the_command_sums_up_a_sound_store_in_one_line(run: Run, known_url: str) -> None:
    outcome = run("--store", known_url, "verify")
    assert (outcome.code, outcome.err) == (0, "")
    assert outcome.out == (
        "ok: 6 events in 4 streams up to position 6, 0 snapshots, "
        "projections not checked (no --app)\n"
    )
    as_json = orjson.loads(run("--store", known_url, "verify", "--json").out)
    assert as_json["problems"] == [] and as_json["events"] == 6


def test_the_command_checks_projections_with_an_app(run: Run, known_url: str) -> None:
    outcome = run("--store", known_url, "--app", "tests.cli.test_verify:app", "verify")
    assert outcome.code == 0
    assert outcome.out.endswith("0 snapshots, 0 projection checkpoints\n")


def test_an_appended_store_still_verifies(run: Run, sqlite_url: str) -> None:
    with EventStore.open(sqlite_url) as store:
        store.append("order-1", [NewEvent("Placed", {}) for _ in range(300)])
    assert run("--store", sqlite_url, "verify").code == 0


def retained(store: EventStore, archive: Path) -> None:
    """Positions 1-9, then a retention run up to 9: audit-1's versions 1-4 (positions 1-4)
    and cart-7's 1-2 (positions 6-7) removed, 6 events."""
    long_ago = datetime.now(UTC) - timedelta(days=400)
    store.append("audit-1", [NewEvent("Seen", {"n": n}, recorded_at=long_ago) for n in range(5)])
    store.append("cart-7", [NewEvent("Added", {"n": n}) for n in range(4)])
    done = retention.apply(
        store,
        [RetentionPolicy("audit", max_age=timedelta(days=365))],
        [Truncation("cart-7", 3)],
        str(archive),
    )
    assert (done.run.up_to, done.run.removed) == (9, 6)


def test_the_versions_retention_removed_are_no_gap(
    run: Run, shared_store_url: str, tmp_path: Path
) -> None:
    with EventStore.open(shared_store_url) as store:
        retained(store, tmp_path / "archive")
        store.append("cart-7", [NewEvent("Added", {"n": 4})])
        found = verify(store)
    assert found.problems == [] and found.ok
    assert (found.events, found.streams, found.low_water_mark) == (4, 2, 9)
    outcome = run("--store", shared_store_url, "verify")
    assert (outcome.code, outcome.err) == (0, "")
    assert "up to position 10 (retention removed events at or below 9)," in outcome.out


def test_gaps_retention_cannot_have_made_are_still_found(sqlite_url: str, tmp_path: Path) -> None:
    with EventStore.open(sqlite_url) as store:
        retained(store, tmp_path / "archive")
        store.append("cart-7", [NewEvent("Added", {"n": n}) for n in range(4, 7)])  # 10-12
        store.append("late-1", [NewEvent("Seen", {"n": n}) for n in range(3)])  # 13-15
    conn = tampered(tmp_path / "events.db")
    # cart-7's version 6 is above the mark; late-1's 1 and 2 have room below it, but the
    # run removed 6 events and 8 versions would then be missing.
    conn.execute("DELETE FROM eventcraft_events WHERE position IN (11, 13, 14)")
    conn.close()
    with EventStore.open(sqlite_url) as store:
        found = verify(store)
    assert [(p.kind, p.where, p.detail) for p in found.problems] == [
        (
            "version gap",
            "cart-7",
            "version 7 (position 12) follows version 5: version 6 missing",
        ),
        (
            "version gap",
            "at or below position 9",
            "8 versions of streams are missing where retention may have removed them, but its "
            "runs removed 6 events",
        ),
    ]
