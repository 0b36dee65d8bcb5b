"""Commands that only read open a store that is there: a database without one (a
mistyped path, another program's file, a mistyped schema) is an input error, and is
left as it was; a URL's own mistakes are input errors found before connecting."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from eventcraft.eventstore import EventStore, NewEvent

from ..conftest import PG_URL
from .conftest import Run, schema_exists

READERS = [("show", "order-1"), ("stats",), ("verify",), ("log",), ("streams",)]


def _tables(path: Path) -> list[str]:
    with sqlite3.connect(path) as look:
        return [name for (name,) in look.execute("SELECT name FROM sqlite_master")]


@pytest.mark.parametrize("command", READERS, ids=lambda c: c[0])
def test_a_reading_command_leaves_another_programs_sqlite_file_as_it_was(
    run: Run, tmp_path: Path, command: tuple[str, ...]
) -> None:
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    outcome = run("--store", f"sqlite:///{other}", *command)
    assert outcome.code == 2
    assert outcome.err.startswith("error: no event store in the SQLite file")
    assert "only import creates a store" in outcome.err
    assert _tables(other) == ["notes"]


@pytest.mark.parametrize("content", [b"", b"not a database\n"], ids=["empty", "junk"])
def test_an_empty_or_junk_file_is_not_read_as_an_empty_store(
    run: Run, tmp_path: Path, content: bytes
) -> None:
    file = tmp_path / "events.db"
    file.write_bytes(content)
    outcome = run("--store", f"sqlite:///{file}", "stats")
    assert (outcome.code, outcome.err.count("\n")) == (2, 1)
    assert "no event store in the SQLite file" in outcome.err
    assert file.read_bytes() == content


def test_a_real_sqlite_store_is_still_read(run: Run, known_url: str) -> None:
    outcome = run("--store", known_url, "show", "order-1")
    assert outcome.code == 0, outcome.err


@pytest.mark.parametrize("command", READERS, ids=lambda c: c[0])
def test_a_mistyped_postgres_schema_is_not_created(
    run: Run, pg_url: str, command: tuple[str, ...]
) -> None:
    schema = pg_url.rpartition("schema=")[2]
    outcome = run("--store", pg_url, *command)
    assert outcome.code == 2, outcome.err
    assert outcome.err.startswith(f"error: no event store in schema {schema!r}")
    assert not schema_exists(schema)


def test_import_still_creates_a_postgres_store(run: Run, pg_url: str, tmp_path: Path) -> None:
    # A file with events: one with none is nothing to import, and makes no store.
    source = f"sqlite:///{tmp_path / 'source.db'}"
    with EventStore.open(source) as store:
        store.append("order-1", [NewEvent("OrderPlaced", {})])
    exported = tmp_path / "one.ndjson"
    assert run("--store", source, "export", "--out", str(exported)).code == 0
    assert run("--store", pg_url, "import", str(exported)).code == 0
    assert run("--store", pg_url, "stats").code == 0


def test_a_parameter_libpq_does_not_take_is_an_input_error(run: Run) -> None:
    outcome = run("--store", f"{PG_URL}?schema=cli_fix_x&bogus=1", "stats")
    assert outcome.code == 2
    assert 'invalid URI query parameter: "bogus"' in outcome.err
    assert "cannot be reached" not in outcome.err


@pytest.mark.parametrize("port", ["99999", "0"])
def test_a_port_out_of_range_is_an_input_error(run: Run, port: str) -> None:
    outcome = run("--store", f"postgresql://postgres@127.0.0.1:{port}/test", "stats")
    assert outcome.code == 2
    assert f"the port must be a number from 1 to 65535, not '{port}'" in outcome.err
