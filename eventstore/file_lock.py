"""`file_lock`: an exclusive lock on a file, taken without waiting, that names its holder.

The store's retention lock on SQLite (`sqlite/retention.py`) and an archive's
(`projections/archive_lock.py`) are this lock on a file of their own.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def file_lock(path: Path, busy: Callable[[str], Exception]) -> Iterator[None]:
    """Hold an exclusive lock on the file `path` (made if missing) until the block ends;
    raise `busy(holder)` at once, `holder` being the process id it shows, if another holds it.

    It is `flock`, not a file made with O_EXCL: the kernel drops it when its
    holder's process dies, so a killed run leaves no lock behind for an operator
    to clear. A lock is an open file's, so two opens in one process exclude too.

    Example::

        import os
        from pathlib import Path

        from eventcraft.eventstore import file_lock


        class NightlyBusy(Exception):
            pass


        def busy(holder: str) -> NightlyBusy:
            return NightlyBusy(f"the nightly job runs already, in process {holder}")


        with file_lock(Path("nightly.lock"), busy):  # one nightly job at a time
            try:
                with file_lock(Path("nightly.lock"), busy):  # a second run, refused at once
                    raise AssertionError("two nightly jobs at once")
            except NightlyBusy as error:
                assert str(error).endswith(f"in process {os.getpid()}")
    """
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(descriptor, 32, 0).decode(errors="replace").strip() or "unknown"
            raise busy(holder) from None
        # Who holds it, for the message a refused run shows; the lock, not this, excludes.
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(descriptor)  # closing drops the lock
