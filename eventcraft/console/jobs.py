"""Rebuilds started from the console: each runs in a thread of its own, and the page
shows how far it has come until it is done (or failed, the old tables still serving)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..operations.projections import Rebuilt


@dataclass
class Rebuild:
    """One rebuild of one projection, as far as it has come."""

    name: str
    started: float = field(default_factory=time.time)
    position: int = 0
    target: int = 0
    result: Rebuilt | None = None
    error: str | None = None

    @property
    def running(self) -> bool:
        return self.result is None and self.error is None

    @property
    def percent(self) -> int:
        if not self.running:
            return 100
        return int(100 * self.position / self.target) if self.target else 0


@dataclass
class Rebuilds:
    """The latest rebuild of each projection; at most one runs for a name at a time."""

    latest: dict[str, Rebuild] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(
        self, name: str, run: Callable[[Callable[[int, int], None]], Rebuilt]
    ) -> Rebuild | None:
        """Start `run(progress)` in a thread; None if a rebuild of `name` is running."""
        with self._lock:
            current = self.latest.get(name)
            if current is not None and current.running:
                return None
            job = self.latest[name] = Rebuild(name)

        def told(position: int, target: int) -> None:
            job.position, job.target = position, target

        def work() -> None:
            try:
                job.result = run(told)
            except Exception as error:  # shown on the page; the old tables still serve
                job.error = f"{type(error).__name__}: {error}"

        threading.Thread(target=work, name=f"console-rebuild-{name}", daemon=True).start()
        return job
