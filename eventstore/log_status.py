"""Where the global log stands, and what holds it back: for operators and their tools."""

from __future__ import annotations

from typing import NamedTuple


class HeldPosition(NamedTuple):
    """A position readers wait at because the append that drew it is still running."""

    position: int
    """The first position past the high-water mark: drawn, neither committed nor rolled back."""
    pid: int | None
    """The PostgreSQL backend running the oldest such append (`pg_stat_activity.pid`); None
    for a prepared transaction, or an append that ended a moment ago."""
    seconds: float
    """How long that transaction has been open, in seconds."""


class LogStatus(NamedTuple):
    """The log's head, how far readers may read, and why not further.

    On SQLite and in memory positions are committed in order: `head` and
    `high_water_mark` are always equal and nothing is ever held.
    """

    head: int
    """The highest committed position."""
    high_water_mark: int
    """The position up to which the log can no longer change: what readers read up to."""
    held: HeldPosition | None
    """What keeps the high-water mark below the head, when it is."""
