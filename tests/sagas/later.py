"""A store as another process sees it some time on: the database's clock cannot be moved,
so a test reads it ahead, to see what a lease taken now will look like once it lapses."""

from __future__ import annotations

from datetime import datetime, timedelta

from eventcraft.eventstore import EventStore

LATER = 61.0
"""Seconds on: past every lease the saga tests take (60 s at most)."""


class Later(EventStore):
    """The store, its database's clock read `LATER` seconds ahead (`Later.open(url)`)."""

    def now(self) -> datetime:
        return super().now() + timedelta(seconds=LATER)
