"""Read models after a forget: a rebuild writes the replacement where the forgotten
customer's fields were and leaves the other customer's rows as before, on every backend;
on SQLite, the procedure the README gives (rebuild, then VACUUM) leaves none of the
forgotten plaintext in the database's files."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from eventcraft.eventstore import FORGOTTEN, EventStore
from eventcraft.projections import ProjectionRunner

from .customers import PLAIN, customer_last_names, customer_names, names, registrations


def _append(store: EventStore) -> None:
    for stream_id, events in registrations().items():
        store.append(stream_id, events)


def _read_models(runner: ProjectionRunner) -> dict[str, list[tuple[Any, ...]]]:
    with runner.database.reading() as connection:
        return {
            table.name: [
                tuple(row)
                for row in connection.execute(sa.select(table).order_by(table.c.customer))
            ]
            for table in (names, customer_last_names.table)
        }


def _every_text(runner: ProjectionRunner) -> str:
    """All there is in the read model database's tables, as text."""
    found = []
    with runner.database.reading() as connection:
        for table in sa.inspect(connection).get_table_names():
            found += [
                repr(tuple(row)) for row in connection.execute(sa.text(f'SELECT * FROM "{table}"'))
            ]
    return "\n".join(found)


def test_a_rebuild_after_a_forget_replaces_the_forgotten_fields_only(store: EventStore) -> None:
    _append(store)
    with ProjectionRunner(store, [customer_names, customer_last_names]) as runner:
        runner.catch_up()
        before = _read_models(runner)
        assert before["customer_names"] == [
            ("ada", "Ada Lovelace Jr", "ada@analytical.example", "silver"),
            ("bob", "Bob Dylan Jr", "bob@x.ex", "silver"),
        ]
        assert before["customer_last_names"] == [
            ("ada", "Ada Lovelace Jr", 2),
            ("bob", "Bob Dylan Jr", 2),
        ]
        store.forget("customer-ada")
        runner.rebuild(customer_names.name)
        runner.rebuild(customer_last_names.name)
        after = _read_models(runner)
        assert after == {
            "customer_names": [
                ("ada", FORGOTTEN, FORGOTTEN, "silver"),
                before["customer_names"][1],
            ],
            "customer_last_names": [("ada", FORGOTTEN, 2), before["customer_last_names"][1]],
        }
        everything = _every_text(runner)
        for text in PLAIN["ada"]:
            assert text not in everything
        assert PLAIN["bob"][0] in everything


def test_on_sqlite_a_rebuild_and_vacuum_leave_no_forgotten_plaintext_in_the_files(
    tmp_path: Path,
) -> None:
    path = tmp_path / "events.db"
    with EventStore.open(f"sqlite:///{path}") as store:
        _append(store)
        with ProjectionRunner(store, [customer_names, customer_last_names]) as runner:
            runner.catch_up()  # the read models hold the plaintext now, in the store's file
            store.forget("customer-ada")
            runner.rebuild(customer_names.name)
            runner.rebuild(customer_last_names.name)
    with sqlite3.connect(path) as conn:
        # The dropped generation's pages are free but not blank: VACUUM writes the file anew.
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    files = [p.read_bytes() for p in tmp_path.glob("events.db*")]
    for text in PLAIN["ada"]:
        assert not any(text.encode() in content for content in files), text
    assert any(PLAIN["bob"][0].encode() in content for content in files)
