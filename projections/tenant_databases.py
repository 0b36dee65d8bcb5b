"""Each tenant's read-model database, no more than `most_open` of them connected at once.

A tenant's read models and checkpoints are in its own place, the database of its store
(`Database.of`), as a `ProjectionRunner` on the tenant's store keeps them. A runner
serving many tenants keeps one `Database` per tenant, but lets only `most_open` of them
hold connections: when another tenant's must be used, the least recently used one that
no thread is using gives its connections back (its engine's pool is emptied; the engine
connects again when next used). A database in use is never emptied under its user: a
thread that finds `most_open` in use waits for one to be free.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

from eventcraft.eventstore import EventStore

from .database import Database


class TenantDatabases:
    """The tenants' read-model databases, at most `most_open` connected at once."""

    def __init__(self, most_open: int) -> None:
        self.most_open = most_open
        self._databases: dict[str, Database] = {}
        self._connected: OrderedDict[str, int] = OrderedDict()  # its users; least recent first
        self._changed = threading.Condition()
        self.most_connected = 0
        """The most databases connected at once so far (a test's and a dashboard's figure)."""

    def connected(self) -> list[str]:
        """The tenants whose databases may hold connections now, least recently used first."""
        with self._changed:
            return list(self._connected)

    @contextmanager
    def using(self, tenant: str, store: EventStore) -> Iterator[Database]:
        """`tenant`'s database (beside `store`, the tenant's) for the block."""
        with self._changed:
            database = self._databases.get(tenant)
            if database is None:
                database = self._databases[tenant] = Database.of(None, store)
            while tenant not in self._connected and len(self._connected) >= self.most_open:
                idle = next((t for t, users in self._connected.items() if users == 0), None)
                if idle is None:
                    self._changed.wait()
                    continue
                del self._connected[idle]
                # Quick (its idle connections closed), so done here: the bound holds.
                self._databases[idle].close()
            self._connected[tenant] = self._connected.get(tenant, 0) + 1
            self._connected.move_to_end(tenant)
            self.most_connected = max(self.most_connected, len(self._connected))
        try:
            yield database
        finally:
            with self._changed:
                self._connected[tenant] -= 1
                self._changed.notify_all()

    def forget(self, tenant: str) -> None:
        """Close `tenant`'s database, once no one uses it, and forget it (a tenant no
        longer served)."""
        with self._changed:
            while self._connected.get(tenant, 0) > 0:
                self._changed.wait()
            self._connected.pop(tenant, None)
            database = self._databases.pop(tenant, None)
            if database is not None:
                database.close()

    def close(self) -> None:
        """Close every tenant's database."""
        with self._changed:
            databases, self._databases = list(self._databases.values()), {}
            self._connected.clear()
        for database in databases:
            database.close()
