"""Whose turn it is: the tenants a many-tenant runner serves, taken in turn by its workers.

Each tenant is due at a time. A worker takes the tenant due first of those no other
worker holds, serves it for one turn (a batch of each projection), and gives it back:
due again at once if it has more to do, later if it had nothing. A tenant given back
at once is due *now*, after every tenant that was due before it, so the tenants with
work take turns, round-robin, and one busy tenant cannot keep the others waiting for
more than one turn each. A tenant that had nothing waits longer each time it has
nothing (`FIRST_LOOK`, doubled up to the runner's `idle`), and is due at once when
nudged (an append the application knows of, a reader waiting for it).

A tenant is held by one worker, or one caller (`claim`), at a time: its checkpoints are
moved by one thread of the runner only.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

FIRST_LOOK = 0.05
"""Seconds before a tenant found with nothing to do is looked at again the first time."""


class TenantTurns:
    """The tenants served, each due at a time, each held by at most one thread."""

    def __init__(self, idle: float) -> None:
        self.idle = idle
        self._changed = threading.Condition()
        self._queue: list[tuple[float, int, str]] = []  # (due, order, tenant), a heap
        self._due: dict[str, float] = {}  # each tenant's due time; its one live entry
        self._pause: dict[str, float] = {}  # how long an idle tenant waits next
        self._held: set[str] = set()
        self._order = itertools.count()
        self._closed = False

    def served(self) -> list[str]:
        """Every tenant served, in the order they were added."""
        with self._changed:
            return list(self._pause)

    def add(self, tenant: str) -> bool:
        """Serve `tenant` from now on, due at once; False if it was served already."""
        with self._changed:
            if tenant in self._pause:
                return False
            self._pause[tenant] = FIRST_LOOK
            self._schedule(tenant, time.monotonic())
            return True

    def remove(self, tenant: str) -> None:
        """Serve `tenant` no more (a turn it is having ends first, as it would)."""
        with self._changed:
            self._pause.pop(tenant, None)
            self._due.pop(tenant, None)

    def nudge(self, tenant: str) -> None:
        """`tenant` is due at once (after those due before it)."""
        with self._changed:
            if tenant in self._pause:
                self._pause[tenant] = FIRST_LOOK
                self._schedule(tenant, time.monotonic())

    def take(self, stopping: threading.Event, most: float) -> str | None:
        """The tenant due first that no one holds, held now; None once `stopping` is set
        or nothing came due within `most` seconds."""
        deadline = time.monotonic() + most
        with self._changed:
            while not stopping.is_set() and not self._closed:
                now = time.monotonic()
                tenant, due = self._first_free()
                if tenant is not None and due <= now:
                    del self._due[tenant]
                    self._held.add(tenant)
                    return tenant
                wake = deadline if tenant is None else min(due, deadline)
                if wake <= now:
                    return None
                self._changed.wait(wake - now)
        return None

    def give_back(self, tenant: str, *, more: bool) -> None:
        """End `tenant`'s turn: due at once with `more` to do, later if it had nothing."""
        with self._changed:
            self._held.discard(tenant)
            pause = self._pause.get(tenant)
            if pause is not None:
                if more:
                    self._pause[tenant] = FIRST_LOOK
                    self._schedule(tenant, time.monotonic())
                else:
                    self._pause[tenant] = min(pause * 2, self.idle)
                    self._schedule(tenant, time.monotonic() + pause)
            self._changed.notify_all()

    @contextmanager
    def claimed(self, tenant: str) -> Iterator[None]:
        """Hold `tenant` for the block, once no worker has it (a catch-up, a rebuild)."""
        with self._changed:
            while tenant in self._held:
                self._changed.wait()
            self._held.add(tenant)
        try:
            yield
        finally:
            with self._changed:
                self._held.discard(tenant)
                self._changed.notify_all()

    def close(self) -> None:
        """Wake every waiting worker: nothing is taken until `reopen`."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def reopen(self) -> None:
        """Take tenants again (a runner started after a stop)."""
        with self._changed:
            self._closed = False

    def _schedule(self, tenant: str, due: float) -> None:
        """Make `tenant` due at `due`, or sooner if it is due sooner already."""
        current = self._due.get(tenant)
        if current is not None and current <= due:
            return
        self._due[tenant] = due
        heapq.heappush(self._queue, (due, next(self._order), tenant))
        self._changed.notify_all()

    def _first_free(self) -> tuple[str | None, float]:
        """The tenant due first that no one holds, and when it is due."""
        skipped: list[tuple[float, int, str]] = []
        found: tuple[str | None, float] = (None, 0.0)
        while self._queue:
            due, _, tenant = self._queue[0]
            if self._due.get(tenant) != due:
                heapq.heappop(self._queue)  # stale: made due sooner, taken, or removed
                continue
            if tenant in self._held:
                skipped.append(heapq.heappop(self._queue))
                continue
            found = (tenant, due)
            break
        for entry in skipped:
            heapq.heappush(self._queue, entry)
        return found
