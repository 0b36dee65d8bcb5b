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
    """Another retention run holds the archive's lock.

    Example::

        from pathlib import Path

        from eventcraft.projections import ArchiveBusy, archive_run_lock

        folder = Path("archive")
        folder.mkdir()
        with archive_run_lock(folder):
            try:
                with archive_run_lock(folder):  # another retention run on the same archive
                    pass
            except ArchiveBusy as error:
                assert "another retention run holds" in str(error)
                assert "this run did nothing" in str(error)
    """


@contextmanager
def run_lock(folder: Path) -> Iterator[None]:
    """Hold the lock of the archive in `folder` (which exists) until the block ends;
    `ArchiveBusy` at once if another run holds it.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections import ArchiveFiles, archive_run_lock

        archive = ArchiveFiles("archive")
        archive.path.mkdir()
        with EventStore.open("sqlite:///shop.db") as store:
            store.append("order-1", [NewEvent("OrderPlaced", {}), NewEvent("OrderPaid", {})])
            with archive_run_lock(archive.path):  # no other run extends the archive meanwhile
                after, upto = archive.last_position(), store.high_water_mark()
                events = store.read_all(after=after, limit=upto - after)
                archive.write_segment(after + 1, upto, events)
        assert archive.last_position() == 2
    """
    path = folder / LOCK_FILE

    def busy(holder: str) -> ArchiveBusy:
        return ArchiveBusy(
            f"another retention run holds {path} (process {holder}): this run did "
            "nothing; run it again when that one has finished"
        )

    with file_lock(path, busy):
        yield
