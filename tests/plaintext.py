"""What a database and an archive hold as bytes, for tests that look for a forgotten
subject's plaintext everywhere it could have been kept."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

import pyarrow.parquet as pq

from .conftest import PG_URL


def database_text(url: str, folder: Path) -> bytes:
    """Everything the database holds: SQLite's files in `folder` after a checkpoint (freed
    pages included), or PostgreSQL's dump of the store's schema (dead row versions are not
    in it)."""
    if url.startswith("sqlite:"):
        path = url.removeprefix("sqlite:///")
        with sqlite3.connect(path) as connection:
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return b"".join(p.read_bytes() for p in folder.glob("events.db*"))
    schema = url.rsplit("schema=", 1)[1]
    dumped = subprocess.run(
        ["pg_dump", "--schema", schema, PG_URL], check=True, capture_output=True
    )
    return dumped.stdout


def archive_text(archive: Path) -> bytes:
    """The archive folder's files as stored, and each Parquet file's values as read."""
    found = []
    for path in sorted(archive.rglob("*")):
        if path.is_file():
            found.append(path.read_bytes())
            if path.suffix == ".parquet":
                found.append(repr(pq.read_table(path).to_pylist()).encode())
    return b"".join(found)
