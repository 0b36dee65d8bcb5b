"""CheckpointTable: a checkpoint, its lease and its parked events, kept by a process
outside the runners (the relay) in transactions of its own."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from eventcraft.eventstore import EventStore, NewEvent
from eventcraft.projections import CheckpointTable, Database


@pytest.fixture
def database(store: EventStore) -> Iterator[Database]:
    database = Database.of(None, store)
    with database.transaction() as connection:
        CheckpointTable(connection).create()
        CheckpointTable(connection).start("out")
    yield database
    database.close()


def _position(database: Database, name: str = "out") -> int:
    with database.reading() as connection:
        row = CheckpointTable(connection).read(name)
    assert row is not None
    return row.position


def test_a_checkpoint_started_again_keeps_where_it_stands(database: Database) -> None:
    with database.transaction() as connection:
        CheckpointTable(connection).advance("out", 7)
    with database.transaction() as connection:
        again = CheckpointTable(connection).start("out")
    assert again.position == 7
    with database.reading() as connection:
        assert CheckpointTable(connection).read("never-started") is None


def test_an_advance_is_undone_with_the_transaction_it_is_part_of(database: Database) -> None:
    with pytest.raises(RuntimeError), database.transaction() as connection:
        table = CheckpointTable(connection)
        row = table.read("out", lock=True)
        assert row is not None and row.position == 0
        table.advance("out", 5)
        raise RuntimeError("the work of the batch failed after the advance")
    assert _position(database) == 0


def test_a_lease_is_one_owners_until_given_back(database: Database) -> None:
    def acquire(owner: str) -> bool:
        with database.transaction() as connection:
            return CheckpointTable(connection).acquire_lease("out", owner, ttl=60.0)

    def release(owner: str) -> None:
        with database.transaction() as connection:
            CheckpointTable(connection).release_lease("out", owner)

    assert acquire("first") is True
    assert acquire("second") is False
    assert acquire("first") is True  # renewed
    release("second")  # not its lease: nothing changes
    assert acquire("second") is False
    release("first")
    assert acquire("second") is True
    with database.reading() as connection:
        row = CheckpointTable(connection).read("out")
    assert row is not None and row.owner == "second"


def test_a_parked_event_is_listed_under_its_name_and_the_checkpoint_stays(
    store: EventStore, database: Database
) -> None:
    store.append("order-1", [NewEvent("OrderPlaced", {"n": n}) for n in range(3)])
    second = list(store.read_all())[1]
    with database.transaction() as connection:
        CheckpointTable(connection).park("out", second, ValueError("too large"))
    with database.transaction() as connection:
        CheckpointTable(connection).park("out", second, ValueError("still too large"), attempts=2)
    with database.reading() as connection:
        table = CheckpointTable(connection)
        (parked,) = table.parked("out")
        assert table.parked("other") == []
    assert (parked.position, parked.event_id) == (second.position, str(second.id))
    assert (parked.error, parked.attempts) == ("ValueError: still too large", 2)
    assert _position(database) == 0


def test_two_processes_starting_one_checkpoint_at_once_both_get_it(pg_url: str) -> None:
    """On PostgreSQL neither finds a row to lock: the second's insert, were it let
    through, would fail on the table's key once the first commits."""
    with EventStore.open(pg_url) as store:
        database = Database.of(None, store)
        try:
            with database.transaction() as connection:
                CheckpointTable(connection).create()
            second_pid: list[int] = []
            second_got: list[object] = []

            def second() -> None:
                try:
                    with database.transaction() as connection:
                        second_pid.append(connection.scalar(sa.text("SELECT pg_backend_pid()")))
                        second_got.append(CheckpointTable(connection).start("both").position)
                except Exception as error:
                    second_got.append(error)

            with database.transaction() as connection:
                assert CheckpointTable(connection).start("both").position == 0
                starting = threading.Thread(target=second)
                starting.start()
                _until_waiting_on_a_lock(database, second_pid)
            starting.join(30)
            assert second_got == [0]
        finally:
            database.close()


def _until_waiting_on_a_lock(database: Database, pid: list[int]) -> None:
    """Returns once the backend whose pid will be in `pid` waits on a lock."""
    query = sa.text("SELECT wait_event_type FROM pg_stat_activity WHERE pid = :pid")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if pid:
            with database.reading() as connection:
                if connection.scalar(query, {"pid": pid[0]}) == "Lock":
                    return
        time.sleep(0.01)
    raise AssertionError("the second start never waited for the first")
