"""CheckpointTable: a checkpoint, its lease and its parked events, kept by a process
outside the runners (the relay) in transactions of its own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
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
