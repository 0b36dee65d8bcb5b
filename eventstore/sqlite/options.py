"""A SQLite store's URL and the settings it opens its file with: what each one keeps.

- `journal_mode = WAL`: a commit appends the transaction's pages to the
  write-ahead log; readers keep reading the pages they started with while a
  writer writes. The log is folded back into the database file every 1,000
  pages (SQLite's `wal_autocheckpoint`, kept), by the committing writer.
- `synchronous = FULL` (the default, whatever the SQLite build's own
  default): each commit waits until the log is on disk (fsync), so an
  append that returned survives a power cut or an OS crash, given a disk
  that keeps what it acknowledged. `fullfsync` asks macOS for the same
  (F_FULLFSYNC: its fsync leaves the data in the drive's cache); elsewhere
  it changes nothing.
- `?synchronous=normal` in the URL: a commit is written to the log but not
  synced; the log is synced at each checkpoint. An append that returned
  survives the application's crash, not a power cut or an OS crash, which
  can lose the last appends before the checkpoint (the file stays
  consistent: a prefix of the log survives, no later event without an
  earlier one). Each commit saves an fsync: a lone writer of single events
  made 470 appends a second with FULL and 3,300 with NORMAL on the machine
  the benchmarks' figures come from (docs/benchmarks).
- The page size stays SQLite's 4,096 bytes: an append writes the pages it
  touches whole into the log, and larger pages would log more untouched
  bytes with each.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..arguments import url_options
from ..errors import UnsupportedStoreURL

PREFIX = "sqlite:///"
SYNCHRONOUS = ("full", "normal")
"""What `?synchronous=` may say; the first is the default."""
OPTIONS = ("synchronous",)
"""The options a SQLite store URL takes."""


@dataclass(frozen=True)
class SQLiteTarget:
    """Where a SQLite store is and how it syncs, from its URL.

    Example::

        from eventcraft.eventstore import SQLiteTarget

        target = SQLiteTarget.from_url("sqlite:///shop.db?synchronous=normal")
        assert (target.path, target.synchronous) == ("shop.db", "normal")
        assert SQLiteTarget.from_url("sqlite:////var/lib/app/shop.db") == SQLiteTarget(
            "/var/lib/app/shop.db", "full"  # every commit synced: the default
        )
    """

    path: str
    """The database file, or `:memory:`."""
    synchronous: str = SYNCHRONOUS[0]
    """`full` (every commit synced) or `normal` (synced at checkpoints)."""

    @classmethod
    def from_url(cls, url: str) -> SQLiteTarget:
        """The target `url` names; `UnsupportedStoreURL` for another URL, or an option
        it does not take."""
        if not url.startswith(PREFIX) or len(url) == len(PREFIX):
            raise UnsupportedStoreURL(
                f"a SQLite store URL is sqlite:///relative/path.db or sqlite:////abs/path.db, "
                f"not {url!r}"
            )
        path = url[len(PREFIX) :].partition("?")[0]
        options = url_options(url, "SQLite", OPTIONS)
        synchronous = options.get("synchronous", SYNCHRONOUS[0]).lower()
        if synchronous not in SYNCHRONOUS:
            raise UnsupportedStoreURL(
                f"synchronous must be one of {', '.join(SYNCHRONOUS)} "
                f"(full: every commit survives a power cut; normal: an application crash), "
                f"not {options['synchronous']!r}"
            )
        return cls(path, synchronous)

    def pragmas(self) -> list[str]:
        """The statements a connection runs first (see the module's docstring)."""
        return [
            "PRAGMA journal_mode = WAL",
            f"PRAGMA synchronous = {self.synchronous.upper()}",
            f"PRAGMA fullfsync = {'ON' if self.synchronous == 'full' else 'OFF'}",
            "PRAGMA busy_timeout = 60000",
        ]
