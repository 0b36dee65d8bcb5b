# Generated from eventstore/postgres/async_tenant_rows.py by scripts/async_to_sync.py: do not edit.
# Edit eventstore/postgres/async_tenant_rows.py, then run `make generate`.
"""A side-by-side tenant's store on PostgreSQL: `PostgresBackend` on the tenant's
views (`side_by_side_layout.py`), but for what a tenant's part of the tables does
differently: how it is opened, its high-water mark (its head, read from its row), and the
snapshot's conflict key. Every other statement is the plain store's, run on the views.
"""

from __future__ import annotations

from typing import Any

import psycopg

from ..errors import UnsupportedStoreURL
from ..log_status import LogStatus
from . import side_by_side_layout as layout
from .backend import PostgresBackend
from .connections import ConnectionPool
from .side_by_side import SideBySide, side_by_side

Conn = psycopg.Connection[Any]


class SideBySideBackend(PostgresBackend):
    """One tenant's part of the tables that hold tenants side by side."""

    @classmethod
    def from_url(cls, url: str, *, group_commit: bool = True) -> SideBySideBackend:
        shared = tenant_of(url)
        notify = layout.prepare(shared)
        # Not the plain backend's __init__, which makes a plain store's tables.
        backend = cls.__new__(cls)
        backend._opened(ConnectionPool(shared.target), notify, group_commit, None)
        return backend

    def _head_on(self, conn: Conn, after: int) -> int:
        """The high-water mark above `after`: the tenant's head, every position at or below
        it committed (`side_by_side_layout.py`)."""
        cursor = conn.execute(layout.HEAD, (after,))
        row = cursor.fetchone()
        return int(row[0]) if row else after

    def log_status(self) -> LogStatus:
        # Nothing holds a tenant's log back: its head is its high-water mark.
        head = self._safe_head(0)
        return LogStatus(head=head, high_water_mark=head, held=None)

    def _save_snapshot_statement(self) -> str:
        # The snapshots' view is keyed by (tenant, stream): the upsert's conflict is there.
        return layout.save_snapshot()


def tenant_of(url: str) -> SideBySide:
    """The side-by-side place of the tenant `url` names; `UnsupportedStoreURL` for a URL of
    no tenant (every tenant's: a store is one tenant's)."""
    shared = side_by_side(url)
    if shared is None or shared.tenant is None:
        raise UnsupportedStoreURL(
            "tenancy=shared holds every tenant side by side: say which tenant's store to "
            "open with ?tenant=NAME, or give the URL to Tenants to open any of them"
        )
    return shared
