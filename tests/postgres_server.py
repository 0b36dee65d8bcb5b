"""A PostgreSQL server of a test's own: made with initdb in a temporary folder, started,
stopped, killed and started again at will, never the shared server the other tests use.

Fault tests (a server that dies under load, settings the shared server lacks such as
`max_prepared_transactions`) use it. The server's binaries come from Debian's packages,
as the shared server's do; PostgreSQL refuses to run as root, so when the tests run as
root the server runs as the `postgres` user.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

import psycopg

from tests.conftest import missing
from tests.ports import free_port


def _binaries() -> Path | None:
    root = Path("/usr/lib/postgresql")
    versions = sorted(root.iterdir(), key=lambda p: int(p.name)) if root.is_dir() else []
    for version in reversed(versions):
        if (version / "bin" / "pg_ctl").exists():
            return version / "bin"
    found = shutil.which("pg_ctl")
    return Path(found).parent if found else None


class PostgresServer:
    """One cluster in `folder`, listening on 127.0.0.1:`port` with trust authentication."""

    def __init__(self, folder: Path, settings: Sequence[str] = ()) -> None:
        binaries = _binaries()
        if binaries is None:
            missing("PostgreSQL's server binaries (initdb, pg_ctl) are not installed")
        self.bin = binaries
        self.folder = folder
        self.data = folder / "data"
        self.port = free_port()
        self.settings = [
            "listen_addresses=127.0.0.1",
            f"port={self.port}",
            f"unix_socket_directories={folder}",
            "fsync=off",  # a test's server: a power cut is not what it tests
            *settings,
        ]
        self._user = "postgres" if os.geteuid() == 0 else None
        if self._user:
            shutil.chown(folder, self._user)
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8")

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def start(self) -> None:
        options = " ".join(f"-c {setting}" for setting in self.settings)
        log = str(self.folder / "server.log")
        self._run("pg_ctl", "-D", str(self.data), "-l", log, "-o", options, "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        """`immediate` is a crash as far as the data is concerned; `fast` a clean shutdown."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def kill(self) -> None:
        """SIGKILL the postmaster and its backends at once, as an OOM kill of the group would."""
        pid = int((self.data / "postmaster.pid").read_text().split()[0])
        children = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
        pids = [pid, *map(int, children.stdout.split())]
        for each in pids:
            with suppress(ProcessLookupError):
                os.kill(each, signal.SIGKILL)
        # Gone and reaped, so that a restart finds neither shared memory still in use nor
        # a process by the pid in postmaster.pid (a zombie counts as running there).
        deadline = time.monotonic() + 10
        while any(Path(f"/proc/{each}").exists() for each in pids):
            if time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL processes {pids} outlived SIGKILL")
            time.sleep(0.01)

    def running(self) -> bool:
        try:
            psycopg.connect(self.url, connect_timeout=1).close()
        except psycopg.OperationalError:
            return False
        return True

    def _run(self, program: str, *arguments: str) -> None:
        command = [str(self.bin / program), *arguments]
        if self._user:
            command = ["runuser", "-u", self._user, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, cwd=self.folder)
        if done.returncode != 0:
            raise RuntimeError(f"{program} failed: {done.stdout}{done.stderr}")


@contextmanager
def postgres_server(settings: Sequence[str] = ()) -> Iterator[PostgresServer]:
    """A started server of the caller's own, removed with its data afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="eventcraft-pg-"))
    server = PostgresServer(folder, settings)
    server.start()
    try:
        yield server
    finally:
        if server.running():
            server.stop("immediate")
        shutil.rmtree(folder, ignore_errors=True)
