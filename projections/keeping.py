"""Keeping something with a term (a lease, a claim) alive while a call that cannot renew
it runs: a thread beside the call renews it, and is joined before the caller goes on.

Used where the work is one call the runner cannot step into: a subscriber's handler
retried outside any transaction (`settling.py`), a relay's `publish` waiting for the
broker's confirms (`eventcraft.messaging`). A renewal that finds the thing lost ends
the keeping; one that fails (the database away) is tried again after `retry` seconds,
for the term lapses unless it is renewed in time.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

log = logging.getLogger("eventcraft.projections")


@contextmanager
def kept_alive(
    renew: Callable[[], bool], pause: Callable[[], float], retry: float, what: str
) -> Iterator[None]:
    """While the block runs, `renew()` after each `pause()` seconds, until it returns
    False (what it renews was lost: it says so itself) or the block ends.

    Example::

        import threading

        from eventcraft.projections import kept_alive

        renewed = threading.Event()

        def renew() -> bool:  # e.g. extend a lease in the database; False once it is lost
            renewed.set()
            return True

        with kept_alive(renew, pause=lambda: 0.01, retry=1.0, what="the export's lease"):
            assert renewed.wait(timeout=5)  # a long call that cannot renew it itself
    """
    done = threading.Event()

    def keep() -> None:
        while not done.wait(max(pause(), 0.0)):
            try:
                if not renew():
                    return
            except Exception:
                log.exception("could not renew %s; trying again", what)
                if done.wait(retry):
                    return

    keeper = threading.Thread(target=keep, name=f"keeping {what}", daemon=True)
    keeper.start()
    try:
        yield
    finally:
        done.set()
        keeper.join()
