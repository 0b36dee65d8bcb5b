"""One retention run at a time per archive: an exclusive lock on a file in its folder.

Two runs at once (overlapping cron jobs, an operator's run during a scheduled
one) would both find the archive ending at the same position, both write the
segment that continues it and both commit one: the archive would overlap
itself, and every read of it fail. A run therefore holds this lock from its
plan until its removal has committed. It is `flock`, not a file made with
O_EXCL: the kernel drops it when its holder's process dies, so a killed run
leaves no lock behind for an operator to clear. It is taken without waiting:
a second run is refused at once, with the holder's process id, rather than
queued behind a run that may take hours (and then plan on what that one
left, which its operator did not see). The file is hidden, so neither the
archive's readers nor Spark's take it for data.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import ProjectionError

LOCK_FILE = ".retention.lock"


class ArchiveBusy(ProjectionError):
    """Another retention run holds the archive's lock."""


@contextmanager
def run_lock(folder: Path) -> Iterator[None]:
    """Hold the lock of the archive in `folder` (which exists) until the block ends;
    `ArchiveBusy` at once if another run holds it."""
    path = folder / LOCK_FILE
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(descriptor, 32, 0).decode(errors="replace").strip() or "unknown"
            raise ArchiveBusy(
                f"another retention run holds {path} (process {holder}): this run did "
                "nothing; run it again when that one has finished"
            ) from None
        # Who holds it, for the message a refused run shows; the lock, not this, excludes.
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(descriptor)  # closing drops the lock
