"""One retention run at a time per archive: an exclusive lock on a file in its folder.

Two runs at once (overlapping cron jobs, an operator's run during a scheduled
one) would both find the archive ending at the same position, both write the
segment that continues it and both commit one: the archive would overlap
itself, and every read of it fail. A run therefore holds this lock from its
plan until its removal has committed. Runs on one store are excluded by the
store's own lock (`Retention.exclusive`), whatever folders they are given; this
one still keeps runs of two stores (a configuration mistake) out of one folder.
It is the store's kind of lock (`eventstore.file_lock`): dropped when
its holder dies, and taken without waiting, so a second run is refused at once,
with the holder's process id. The file is hidden, so neither the archive's
readers nor Spark's take it for data.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from eventcraft.eventstore import file_lock

from .errors import ProjectionError

LOCK_FILE = ".retention.lock"


class ArchiveBusy(ProjectionError):
    """Another retention run holds the archive's lock."""


@contextmanager
def run_lock(folder: Path) -> Iterator[None]:
    """Hold the lock of the archive in `folder` (which exists) until the block ends;
    `ArchiveBusy` at once if another run holds it."""
    path = folder / LOCK_FILE

    def busy(holder: str) -> ArchiveBusy:
        return ArchiveBusy(
            f"another retention run holds {path} (process {holder}): this run did "
            "nothing; run it again when that one has finished"
        )

    with file_lock(path, busy):
        yield
