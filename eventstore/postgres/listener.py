"""Waking readers on PostgreSQL: LISTEN for the NOTIFY every append sends.

Not generated from, nor the source of, `async_listener.py`: this one is a
thread blocked in a read of its connection, ended by closing the connection
from another thread, where that one is a task the loop wakes, ended by
cancelling it. The rule they keep is the same, and is this docstring's.

Each append is followed, once it has committed, by a NOTIFY on the channel
`NOTIFY_CHANNEL` with the store's schema as payload (`wire.py`).
One thread per store listens on its own connection and counts the
notifications for its schema; waiters sleep on a condition until the count
moves, then look at the high-water mark again.

A notification is a hint, never the truth: the event it announces may still
sit behind an older open transaction (the ordering rule in `schema.py`), a
rolled-back transaction that held the gap sends none, and a writer that dies
between its commit and its NOTIFY sends none either. So waiters also wake
every `RECHECK` seconds, and the answer is always the high-water mark.

LISTEN needs a session that stays the listener's: straight to PostgreSQL or through a
session pooler, the store's own target gives one; behind a transaction pooler, the URL's
`direct=` (`PostgresTarget.direct_target`). Without it nobody listens, and waiters look
every `RECHECK` seconds alone.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import psycopg

from ..sql.schema import NOTIFY_CHANNEL
from .connections import ConnectionPool

RECHECK = 0.5
"""Longest a waiter sleeps without looking at the high-water mark, in seconds."""

_RECONNECT_PAUSE = 0.5


class Listener:
    def __init__(self, pool: ConnectionPool) -> None:
        direct = pool.target.direct_target()
        # A connection of its own, not one of the pool's; None: nobody listens.
        self._pool = pool if direct is pool.target or direct is None else ConnectionPool(direct)
        self._polls = direct is None
        self._changed = threading.Condition()
        self._count = 0
        self._listening = threading.Event()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        self._conn: psycopg.Connection[tuple[object, ...]] | None = None

    def wait(self, after: int, timeout: float, mark: Callable[[], int]) -> bool:
        self._start()
        deadline = time.monotonic() + timeout
        while True:
            with self._changed:
                seen = self._count
            # Read after taking `seen`: a commit between the two shows as a new count.
            if mark() > after:
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            with self._changed:
                if self._count == seen:
                    self._changed.wait(min(remaining, RECHECK))

    def close(self) -> None:
        self._closed.set()
        conn = self._conn
        if conn is not None:
            # Closing from another thread ends the listener's blocking read.
            conn.close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _start(self) -> None:
        if self._polls:
            return
        with self._changed:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._listen, name="eventcraft-listener", daemon=True
                )
                self._thread.start()
        # Until LISTEN runs, a notification could be missed; RECHECK bounds the cost.
        self._listening.wait(timeout=RECHECK)

    def _listen(self) -> None:
        while not self._closed.is_set():
            try:
                self._conn = conn = self._pool.connect()
                schema = conn.execute("SELECT current_schema()").fetchone()
                conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                self._listening.set()
                self._bump()  # anything committed while we were away is worth a look
                while not self._closed.is_set():
                    for note in conn.notifies(timeout=RECHECK):
                        if schema is None or note.payload == schema[0]:
                            self._bump()
            except Exception:  # a lost connection: waiters fall back to RECHECK meanwhile
                if self._closed.is_set():
                    return
                time.sleep(_RECONNECT_PAUSE)
            finally:
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None

    def _bump(self) -> None:
        with self._changed:
            self._count += 1
            self._changed.notify_all()
