"""The keys of personal data of tenants side by side: one key table, `eventcraft_keys` in
the tables' schema (`shop__rows`), each tenant's subjects kept under its id (`acme/c1`).

The key table is the plain store's (`key_table.py`): a forget rewrites it with `VACUUM
FULL`, which a view cannot be, so it has no `tenant` column and no row-level security.
A tenant's key table holds to its own subjects in every call: it names them with its
prefix, opens only keys whose subject has it, and hands them back without it. A tenant's
drop deletes its keys (`side_by_side_layout.drop_tenant`); their bytes leave the table's
file with the next forget's rewrite.
"""

from __future__ import annotations

from collections.abc import Collection

from ..arguments import redacted
from ..personal.key_table import DataKey, KeyTable
from .async_tenant_rows import tenant_of
from .key_table import PostgresKeyTable
from .side_by_side import rows_url


class TenantKeyTable(KeyTable):
    """One side-by-side tenant's part of the shared key table.

    Example::

        # needs: postgres
        from eventcraft.eventstore.postgres.side_by_side_keys import TenantKeyTable

        url = "postgresql://postgres@localhost:5432/eventcraft?schema=shop&tenancy=shared"
        acme = TenantKeyTable(url + "&tenant=acme")
        globex = TenantKeyTable(url + "&tenant=globex")
        try:
            assert acme.of_subject("c1") == globex.of_subject("c1") == []
        finally:
            acme.close()
            globex.close()
    """

    def __init__(self, url: str) -> None:
        shared = tenant_of(url)
        assert shared.tenant is not None
        self.url = redacted(url)
        self._prefix = f"{shared.tenant}/"
        self._table = PostgresKeyTable(rows_url(shared))

    def _own(self, key: DataKey) -> DataKey:
        return DataKey(key.id, key.subject[len(self._prefix) :], key.material)

    def live_keys(self, subjects: Collection[str]) -> dict[str, DataKey]:
        found = self._table.live_keys([self._prefix + subject for subject in subjects])
        return {key.subject: key for key in map(self._own, found.values())}

    def keys(self, key_ids: Collection[str]) -> dict[str, DataKey]:
        return {
            key_id: self._own(key)
            for key_id, key in self._table.keys(key_ids).items()
            if key.subject.startswith(self._prefix)  # another tenant's key opens nothing here
        }

    def forget(self, subject: str) -> int:
        return self._table.forget(self._prefix + subject)

    def of_subject(self, subject: str) -> list[DataKey]:
        return [self._own(key) for key in self._table.of_subject(self._prefix + subject)]

    def holds_keys(self) -> bool:
        # The shared table's answer: True once any tenant sealed (never a wrong False).
        return self._table.holds_keys()

    def erasure_pending(self) -> bool:
        return self._table.erasure_pending()

    def close(self) -> None:
        self._table.close()
