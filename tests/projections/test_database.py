"""The read-model database opened from a store URL keeps to that URL's pool bounds."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from eventcraft.eventstore import EventStore
from eventcraft.projections.database import Database, engine_for


@pytest.fixture
def bounded(pg_url: str) -> Iterator[Database]:
    with EventStore.open(pg_url):  # the schema the URL names
        pass
    database = Database(engine_for(f"{pg_url}&pool_size=2&pool_timeout=0.3"))
    try:
        yield database
    finally:
        database.close()


def test_a_caller_beyond_the_urls_pool_size_waits_then_is_refused(bounded: Database) -> None:
    # An operator caps a role's connections and sets pool_size to match: the read
    # models' database, opened from the same URL, must not open more than that.
    held = threading.Barrier(3)
    release = threading.Event()
    pids: list[int] = []

    def hold() -> None:
        with bounded.transaction() as connection:
            pids.append(connection.exec_driver_sql("SELECT pg_backend_pid()").scalar_one())
            held.wait()
            release.wait(30)

    holders = [threading.Thread(target=hold) for _ in range(2)]
    for holder in holders:
        holder.start()
    try:
        held.wait(30)
        with pytest.raises(sa.exc.TimeoutError, match="size 2 overflow 0"), bounded.reading():
            pass
    finally:
        release.set()
        for holder in holders:
            holder.join(30)
    assert len(set(pids)) == 2
    with bounded.reading() as connection:  # given back: usable again
        assert connection.exec_driver_sql("SELECT pg_backend_pid()").scalar_one() in pids


def test_a_store_opens_in_its_file_while_read_models_made_there_first_are_read(
    tmp_path: Path,
) -> None:
    # A tenant's runner can make its read models in the tenant's file before the tenant's
    # store first opens there: the file must be in the store's WAL mode, or the runner's
    # read keeps the store from opening for the busy timeout, then fails it.
    url = f"sqlite:///{tmp_path}/acme.db"
    database = Database(engine_for(url))
    try:
        with database.transaction() as connection:
            connection.exec_driver_sql("CREATE TABLE totals (cents INTEGER)")
        opened: list[int] = []
        with database.reading() as connection:
            connection.exec_driver_sql("SELECT * FROM totals").all()

            def open_store() -> None:
                with EventStore.open(url):
                    opened.append(1)

            opening = threading.Thread(target=open_store, daemon=True)
            opening.start()
            opening.join(30)  # a minute's busy timeout before the fix
            assert opened == [1]
        with database.reading() as connection:
            mode = connection.exec_driver_sql("PRAGMA journal_mode").scalar_one()
        assert mode == "wal"
    finally:
        database.close()


def test_a_tenants_url_opens_the_tenants_own_database(tmp_path: Path) -> None:
    # A read model kept apart from the store (database=) for one tenant: its template's
    # text is no file name, or every tenant's read models would share `{tenant}.db`.
    engine = engine_for(f"sqlite:///{tmp_path}/{{tenant}}-models.db?tenant=acme")
    with engine.begin() as connection:
        connection.exec_driver_sql("CREATE TABLE totals (cents INTEGER)")
    engine.dispose()
    assert [path.name for path in tmp_path.iterdir()] == ["acme-models.db"]
