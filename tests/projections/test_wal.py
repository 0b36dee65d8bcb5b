"""A read-model database on SQLite empties its WAL on demand (`Database.truncate_wal`), so
that text a forget overwrote is kept in neither the WAL nor the database file."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from eventcraft.eventstore import EventStore
from eventcraft.projections import Database


def test_the_wal_is_emptied_into_the_database_file(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    url = f"sqlite:///{path}"
    with EventStore.open(url) as store:  # the store's file is in WAL mode
        database = Database.of(None, store)
        try:
            with database.transaction() as connection:
                connection.execute(sa.text("CREATE TABLE notes (text TEXT)"))
                connection.execute(sa.text("INSERT INTO notes VALUES ('written once')"))
            wal = Path(f"{path}-wal")
            assert wal.stat().st_size > 0
            assert database.truncate_wal()
            assert wal.stat().st_size == 0
            with database.reading() as connection:
                assert connection.execute(sa.text("SELECT text FROM notes")).scalar_one() == (
                    "written once"
                )
        finally:
            database.close()


def test_a_database_without_a_wal_has_nothing_to_empty(store: EventStore) -> None:
    database = Database.of(None, store)
    try:
        assert database.truncate_wal()
    finally:
        database.close()
