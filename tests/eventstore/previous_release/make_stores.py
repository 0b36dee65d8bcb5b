"""Writes the stores `test_upgrade.py` opens: made by the previous release's code.

Run with that release on the path (the commit before ids became bytes on SQLite):

    git archive fe496fc | tar -x -C /tmp/previous   # and lay it out as the wheel does
    PYTHONPATH=/tmp/previous-package python tests/eventstore/previous_release/make_stores.py

It writes `store.db` (SQLite) beside itself, and `postgres.sql`: a pg_dump, with
INSERTs, of a store made in the schema `SCHEMA` on the server at `EVENTCRAFT_TEST_PG`.
"""

from __future__ import annotations

import os
import re
import subprocess
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
SCHEMA = "eventcraft_previous_release"
"""The schema of the dump; a test loads it under a name of its own."""

APPENDS: list[tuple[str, list[tuple[str, str, dict[str, Any], dict[str, Any]]]]] = [
    (
        "order-1",
        [
            ("4f1c2a7e-9b3d-4c55-8e21-6a0f7d93b512", "Placed", {"total": 10}, {}),
            ("0192f3a4-5b6c-7d8e-9f01-23456789abcd", "Paid", {"amount": 10}, {"user": "ann"}),
        ],
    ),
    ("order-2", [("9d8e7f60-1a2b-4c3d-8e4f-5a6b7c8d9e0f", "Placed", {"total": 20}, {})]),
    ("invoice-1", [("00000000-0000-4000-8000-000000000001", "Issued", {"n": 1}, {})]),
]
"""Each append the previous release made, in order: a stream and its events (id, type,
data, metadata). Positions follow from the order: 1 to 4."""
SNAPSHOT = ("order-1", 2, "Order", {"total": 10, "paid": True})


def write(url: str) -> None:
    from eventcraft.eventstore import EventStore, NewEvent

    with EventStore.open(url) as store:
        for stream_id, events in APPENDS:
            store.append(
                stream_id,
                [
                    NewEvent(type, data, metadata, id=uuid.UUID(id))
                    for id, type, data, metadata in events
                ],
                0,
            )
        stream_id, version, type, data = SNAPSHOT
        store.save_snapshot(stream_id, version=version, type=type, data=data)


def main() -> None:
    import psycopg

    server = os.environ.get("EVENTCRAFT_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
    path = HERE / "store.db"
    path.unlink(missing_ok=True)
    write(f"sqlite:///{path}")
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
    write(f"{server}?schema={SCHEMA}")
    dump = subprocess.run(
        ["pg_dump", "--dbname", server, "--schema", SCHEMA, "--inserts", "--no-owner"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    # psql's commands (\restrict) and comments are no SQL a driver runs.
    kept = [line for line in dump.splitlines() if not re.match(r"\\|--", line)]
    (HERE / "postgres.sql").write_text("\n".join(kept).strip() + "\n")
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {SCHEMA} CASCADE")


if __name__ == "__main__":
    main()
