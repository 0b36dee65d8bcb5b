"""Opening the store a shell was pointed at: a SQLite file that is not there is created
only by a command that writes, so a mistyped path is an error, not an empty store."""

from __future__ import annotations

import os

from eventcraft.eventstore import EventStore
from eventcraft.eventstore.sqlite_options import PREFIX, SQLiteTarget

from .errors import NotFound


def open_store(url: str, *, create: bool = False) -> EventStore:
    """The store at `url`; `NotFound` for a SQLite file that does not exist, unless
    `create` (the backend would create it, and its folders, for a read that finds nothing)."""
    path = _sqlite_file(url)
    if path is not None and not create and not os.path.exists(path):
        raise NotFound(f"no SQLite store at {path!r}: check the path (only import creates a store)")
    return EventStore.open(url)


def _sqlite_file(url: str) -> str | None:
    """The file a `sqlite:///` URL names, absolute; None for other stores and `:memory:`."""
    if not url.startswith(PREFIX):
        return None
    path = SQLiteTarget.from_url(url).path  # UnsupportedStoreURL, as EventStore.open
    return None if path == ":memory:" else os.path.abspath(path)
