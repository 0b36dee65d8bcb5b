"""A primary and a hot standby of a test's own: a cluster made with initdb, a streaming
replica of it made with `pg_basebackup -R`, each in a temporary folder on a port of its
own, stopped and removed at the end. Never the shared server the other tests use.

`replica_pair()` starts both; the standby follows the primary over streaming
replication and answers reads (`hot_standby`). A test pauses and resumes its replay
(`pause_replay`, `resume_replay`), waits for it to catch up (`caught_up`) or promotes it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

from tests.ports import free_port
from tests.postgres_server import PostgresServer

PRIMARY_SETTINGS = (
    "wal_level=replica",
    "max_wal_senders=4",
    "hot_standby=on",
    "max_connections=60",
    "max_prepared_transactions=4",
)
"""The primary's settings: WAL a standby can replay, senders to stream it."""

STANDBY_SETTINGS = (
    "hot_standby=on",
    "max_connections=60",
    "max_prepared_transactions=4",
    # A read on the standby is never cancelled for what replay removes: a paused or
    # slow test's reader sees the data it began with.
    "max_standby_streaming_delay=-1",
    "wal_receiver_status_interval=1s",
)
"""The standby's settings (a standby needs at least the primary's max_connections and
max_prepared_transactions)."""


class StandbyServer(PostgresServer):
    """A streaming standby of `primary`, made by `pg_basebackup -R` into `folder`."""

    def __init__(self, folder: Path, primary: PostgresServer, settings: Sequence[str] = ()) -> None:
        # Not PostgresServer.__init__: a standby is copied from its primary, not initdb'd.
        self.bin = primary.bin
        self.folder = folder
        self.data = folder / "data"
        self.port = free_port()
        self.settings = [
            "listen_addresses=127.0.0.1",
            f"port={self.port}",
            f"unix_socket_directories={folder}",
            "fsync=off",
            *settings,
        ]
        self._user = primary._user
        if self._user:
            shutil.chown(folder, self._user)
        self._run(
            "pg_basebackup",
            *("-D", str(self.data), "-h", "127.0.0.1", "-p", str(primary.port)),
            *("-U", "postgres", "-X", "stream", "-R", "-c", "fast"),
        )


@contextmanager
def replica_pair() -> Iterator[tuple[PostgresServer, StandbyServer]]:
    """A started primary and a started hot standby of it, removed with their data after."""
    folder = Path(tempfile.mkdtemp(prefix="eventcraft-replica-"))
    primary_folder, standby_folder = folder / "primary", folder / "standby"
    primary_folder.mkdir()
    standby_folder.mkdir()
    if os.geteuid() == 0:  # the servers run as postgres (PostgresServer says why)
        shutil.chown(folder, "postgres")
    primary = PostgresServer(primary_folder, PRIMARY_SETTINGS)
    primary.start()
    standby: StandbyServer | None = None
    try:
        standby = StandbyServer(standby_folder, primary, STANDBY_SETTINGS)
        standby.start()
        _wait_until(lambda: in_recovery(standby.url), "the standby accepts reads")
        yield primary, standby
    finally:
        for server in (standby, primary):
            if server is not None and server.running():
                server.stop("immediate")
        shutil.rmtree(folder, ignore_errors=True)


def in_recovery(url: str) -> bool:
    """Whether the server at `url` is a standby (False if it does not answer)."""
    try:
        with psycopg.connect(url, connect_timeout=2, autocommit=True) as conn:
            row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
    except psycopg.OperationalError:
        return False
    return bool(row and row[0])


def _one(url: str, statement: str, params: Sequence[Any] = ()) -> Any:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(statement, params).fetchone()
    return row[0] if row else None


def pause_replay(standby: PostgresServer) -> None:
    """Stop the standby's replay where it is (it still receives WAL)."""
    _one(standby.url, "SELECT pg_wal_replay_pause()")
    _wait_until(
        lambda: _one(standby.url, "SELECT pg_get_wal_replay_pause_state()") == "paused",
        "the standby's replay pauses",
    )


def resume_replay(standby: PostgresServer) -> None:
    """Let the standby's replay go on."""
    _one(standby.url, "SELECT pg_wal_replay_resume()")


def caught_up(primary: PostgresServer, standby: PostgresServer, timeout: float = 30) -> None:
    """Wait until the standby has replayed everything the primary had written when asked."""
    target = _one(primary.url, "SELECT pg_current_wal_insert_lsn()::text")
    _wait_until(
        lambda: _one(standby.url, "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (target,)),
        f"the standby replays up to {target}",
        timeout,
    )


def promote(standby: PostgresServer) -> None:
    """Make the standby a primary of its own (its replay ends, it takes writes)."""
    _one(standby.url, "SELECT pg_promote(true, 60)")
    _wait_until(lambda: not in_recovery(standby.url), "the standby is promoted")


def _wait_until(ready: Any, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting until {what}")
        time.sleep(0.05)
