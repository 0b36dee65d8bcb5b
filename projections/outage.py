"""A runner's view of a database outage: said once, waited out with backoff, said when over.

While the store or the read-model database cannot be reached every call fails
at once, and each projection's thread would log a traceback per try. Instead
the runner keeps one `OutageWatch`: the first failure logs the outage with its
cause, each thread waits longer after each failed try (with jitter, so that the
threads of many runners do not come back in step), and the first try that goes
through logs the recovery. `status()` reports the outage meanwhile.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from dataclasses import dataclass

import sqlalchemy as sa
from eventcraft.eventstore import StoreUnavailable

FIRST_BACKOFF = 0.1
"""Seconds before a projection's first retry in an outage."""
MAX_BACKOFF = 5.0
"""The longest wait between retries: after an outage, each projection is back within it."""


def is_outage(error: BaseException) -> bool:
    """Whether `error` says the store or the read-model database cannot be reached."""
    if isinstance(error, StoreUnavailable):
        return True
    if isinstance(error, sa.exc.DBAPIError):
        return error.connection_invalidated or isinstance(
            error, sa.exc.OperationalError | sa.exc.InterfaceError
        )
    return False


def cause_of(error: BaseException) -> str:
    """`error` in one line, the driver's own error for one SQLAlchemy wraps."""
    if isinstance(error, sa.exc.DBAPIError) and error.orig is not None:
        text = f"{type(error.orig).__name__}: {error.orig}"
    else:
        text = f"{type(error).__name__}: {error}"
    return " ".join(text.split())


def next_backoff(delay: float) -> float:
    """The wait after a failed try that waited `delay`: doubled, at most `MAX_BACKOFF`."""
    return min(delay * 2, MAX_BACKOFF)


def jittered(delay: float) -> float:
    """`delay` less up to half of it at random."""
    return delay * random.uniform(0.5, 1.0)


@dataclass(frozen=True)
class Outage:
    """An outage as a runner saw it."""

    cause: str
    """The last failure, in one line."""
    since: float
    """When the first try failed (time.time())."""


class OutageWatch:
    """The outage a runner's threads are in, if any; each of them reports its tries."""

    def __init__(self, log: logging.Logger) -> None:
        self._log = log
        self._lock = threading.Lock()
        self.current: Outage | None = None
        """None while the database answers."""

    def failed(self, name: str, error: BaseException, retry_in: float) -> None:
        """Projection `name`'s try failed on `error`; it tries again in `retry_in` s."""
        cause = cause_of(error)
        with self._lock:
            before = self.current
            self.current = Outage(cause, time.time() if before is None else before.since)
        if before is None:
            self._log.warning(
                "projections cannot reach the database (%s); retrying, at most %.0f s apart",
                cause,
                MAX_BACKOFF,
                extra={"projection": name},
            )
        else:
            self._log.debug(
                "projection %r still cannot reach the database (%s); next try in %.2f s",
                name,
                cause,
                retry_in,
                extra={"projection": name},
            )

    def passed(self) -> None:
        """A try went through: the outage, if there was one, is over."""
        if self.current is None:  # the common case, without the lock
            return
        with self._lock:
            ended, self.current = self.current, None
        if ended is not None:
            self._log.warning(
                "projections reach the database again after %.1f s without it",
                time.time() - ended.since,
            )
