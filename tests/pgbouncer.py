"""A PgBouncer of the tests' own, in front of the shared PostgreSQL (`PG_URL`): its
pgbouncer.ini and user list written into a folder of its own, on a port of its own,
stopped at the end. The shared server's configuration is never touched.

Its `[databases]` give the test database under two names, each as PgBouncer lends
connections in one pool mode: `PG_URL`'s own name in transaction pooling (what most
deployments that put PgBouncer in front of many clients run), and `<name>_session` in
session pooling, PgBouncer's default. The binary is Debian's `pgbouncer`
(`scripts/ensure-postgres.sh` installs it); PgBouncer refuses to run as root, so when the
tests run as root it runs as the `postgres` user, as `postgres_server.py`'s servers do.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.conftest import PG_URL, _need_postgres, missing
from tests.ports import free_port

START_WAIT = 10.0
"""Longest wait for PgBouncer to listen, in seconds."""


@dataclass(frozen=True)
class PgBouncer:
    """A running PgBouncer on 127.0.0.1:`port`."""

    port: int
    database: str
    """The test database's name, in transaction pooling; `database + "_session"` in
    session pooling."""
    user: str

    def url(self, *, mode: str = "transaction") -> str:
        """A URL to the test database through PgBouncer, pooled in `mode` (no store
        parameters)."""
        name = self.database if mode == "transaction" else f"{self.database}_session"
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{name}"


def _binary() -> str | None:
    return shutil.which("pgbouncer") or next(
        (path for path in ("/usr/sbin/pgbouncer",) if os.access(path, os.X_OK)), None
    )


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.2)
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="session")
def pgbouncer() -> Iterator[PgBouncer]:
    """PgBouncer 1.18 or later (Debian's), started for this session of pytest."""
    _need_postgres()
    binary = _binary()
    if binary is None:
        missing("PgBouncer is not installed (Debian's pgbouncer package)")
    server = urlsplit(PG_URL)
    database = server.path.strip("/") or "postgres"
    user = server.username or "postgres"
    folder = Path(tempfile.mkdtemp(prefix="eventcraft-pgbouncer-"))
    folder.chmod(0o755)  # read by the postgres user when the tests run as root
    port = free_port()
    backend = f"host={server.hostname or '127.0.0.1'} port={server.port or 5432} dbname={database}"
    (folder / "userlist.txt").write_text(f'"{user}" ""\n')
    (folder / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"{database} = {backend}\n"
        f"{database}_session = {backend} pool_mode=session\n"
        "[pgbouncer]\n"
        "listen_addr = 127.0.0.1\n"
        f"listen_port = {port}\n"
        "unix_socket_dir =\n"
        "auth_type = trust\n"
        f"auth_file = {folder / 'userlist.txt'}\n"
        "pool_mode = transaction\n"
        "max_client_conn = 500\n"
        # The shared server's connections are every worker's: at most 10 held per pool,
        # given back after 10 s idle.
        "default_pool_size = 10\n"
        "server_idle_timeout = 10\n"
    )
    command = [binary, str(folder / "pgbouncer.ini")]
    if os.geteuid() == 0:
        command[1:1] = ["-u", "postgres"]
    log = (folder / "pgbouncer.log").open("wb")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_WAIT
        while not _listening(port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"PgBouncer did not start: {(folder / 'pgbouncer.log').read_text()}"
                )
            time.sleep(0.05)
        yield PgBouncer(port, database, user)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
        shutil.rmtree(folder, ignore_errors=True)


def direct_url() -> str:
    """`PG_URL` without its query: PostgreSQL itself, for a store URL's `direct=`."""
    parts = urlsplit(PG_URL)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


@pytest.fixture
def pgbouncer_url(pgbouncer: PgBouncer, pg_url: str) -> str:
    """`pg_url`'s new store (its schema dropped afterwards) through PgBouncer in
    transaction pooling, with PostgreSQL itself as its `direct=`."""
    query = urlsplit(pg_url).query
    return f"{pgbouncer.url()}?{query}&pooler=transaction&direct={direct_url()}"
