"""Whether a database holds an event store, asked without making one there."""

from __future__ import annotations

from pathlib import Path

import pytest
from eventcraft.eventstore import (
    EventStore,
    PostgresTarget,
    SQLiteTarget,
    StoreUnavailable,
    postgres_holds_store,
    sqlite_file_holds_store,
)


def _holds(url: str) -> bool:
    if url.startswith("sqlite"):
        return sqlite_file_holds_store(SQLiteTarget.from_url(url).path)
    return postgres_holds_store(url, PostgresTarget.from_url(url))


def test_a_database_holds_a_store_once_one_was_opened_there(shared_store_url: str) -> None:
    if shared_store_url.startswith("sqlite"):
        Path(SQLiteTarget.from_url(shared_store_url).path).write_bytes(b"")
    assert not _holds(shared_store_url)
    assert not _holds(shared_store_url)  # the look made nothing
    with EventStore.open(shared_store_url):
        pass
    assert _holds(shared_store_url)


def test_a_file_that_is_no_sqlite_database_holds_no_store(tmp_path: Path) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("not a database, " * 100)
    assert not sqlite_file_holds_store(str(other))
    assert other.read_text() == "not a database, " * 100


def test_a_folder_cannot_be_looked_in(tmp_path: Path) -> None:
    with pytest.raises(StoreUnavailable, match="cannot open the event store at"):
        sqlite_file_holds_store(str(tmp_path))


def test_a_server_that_does_not_answer_is_unavailable_naming_the_url_masked() -> None:
    url = "postgresql://someone:secret@127.0.0.1:1/test?connect_timeout=2"
    with pytest.raises(StoreUnavailable) as raised:
        postgres_holds_store(url, PostgresTarget.from_url(url))
    assert "secret" not in str(raised.value)
