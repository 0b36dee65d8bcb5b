"""Tenants side by side in one PostgreSQL schema: what a store URL says of them.

`postgresql://app@db/shop?schema=shop&tenancy=shared` holds every tenant's events in the
tables of one place; `&tenant=acme` on it opens acme's part. The tables are in the schema
`shop__rows`, each with a `tenant` column; `shop` holds a view of each table that shows
the rows of the connection's tenant alone, and the store's functions. A tenant's store
connects with `shop` as its search path and `eventcraft.tenant` set to its tenant id, so
every statement the store runs, written for a store of its own, reads and writes the
tenant's rows alone (`side_by_side_layout.py` says how, and why positions stay gap-free).

What a side-by-side tenant's store does not take yet is refused when its URL is read:
`pooler=` (the tenant's setting would have to go in each transaction), `replica=` and
`partition_events=`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..errors import UnsupportedStoreURL
from ..tenant_ids import check_tenant
from .target import PostgresTarget

TENANCY_OPTION = "tenancy"
"""The URL option that places tenants side by side: `?tenancy=shared`."""
SHARED = "shared"
"""`tenancy`'s one value: every tenant's rows in one schema's tables."""
TENANT_SETTING = "eventcraft.tenant"
"""The setting a tenant's connections carry: the views and the row-level security
policies show the rows whose `tenant` equals it."""
ROWS_SUFFIX = "__rows"
"""The schema of the tables is the URL's schema and this (`shop__rows`): no tenant's schema
of a `{tenant}` template can be named so, as no tenant id begins with `-`."""

_MOST_SCHEMA = 63 - len(ROWS_SUFFIX)
_NOT_TAKEN = ("pooler", "replica", "partition_events")


@dataclass(frozen=True)
class TenantTarget(PostgresTarget):
    """A side-by-side tenant's connections: the views' schema first in the search path,
    and `eventcraft.tenant` set to the tenant's id.

    Example::

        from eventcraft.eventstore.postgres.side_by_side import side_by_side

        shared = side_by_side(
            "postgresql://app@db.example/shop?schema=shop&tenancy=shared&tenant=acme"
        )
        assert shared is not None and (shared.tenant, shared.rows) == ("acme", "shop__rows")
        assert "-c eventcraft.tenant=acme" in shared.target.options()
    """

    tenant: str = ""
    """The tenant id (checked: letters, digits and `-`, so no quoting in `options`)."""

    def options(self) -> str:
        return f"{super().options()} -c {TENANT_SETTING}={self.tenant}"


@dataclass(frozen=True)
class SideBySide:
    """What a side-by-side URL names: the tenant, and where its rows are."""

    tenant: str | None
    """The tenant id of `?tenant=`, checked; None for the URL of every tenant."""
    schema: str
    """The schema of the views and functions (the URL's `schema`)."""
    rows: str
    """The schema of the tables, every tenant's rows in them."""
    target: TenantTarget
    """Where a tenant's connections go, and with what settings."""
    url: str
    """The URL without `tenant=`: the place every tenant shares."""


def is_side_by_side(url: str) -> bool:
    """Whether the PostgreSQL store URL `url` asks for tenants side by side."""
    query = urlsplit(url).query
    return any(name == TENANCY_OPTION for name, _ in parse_qsl(query, keep_blank_values=True))


def side_by_side(url: str) -> SideBySide | None:
    """What the store URL `url` says of tenants side by side, None if it asks for none;
    `UnsupportedStoreURL` for a `tenancy` the store does not know, a URL without `schema`,
    or an option a side-by-side store does not take."""
    if not is_side_by_side(url):
        return None
    parts = urlsplit(url)
    items = parse_qsl(parts.query, keep_blank_values=True)
    query = dict(items)
    if len(query) != len(items):
        raise UnsupportedStoreURL("a store URL gives each option once")
    tenancy = query.pop(TENANCY_OPTION)
    if tenancy != SHARED:
        raise UnsupportedStoreURL(
            f"tenancy must be {SHARED!r} (every tenant's events side by side in the schema's "
            f"tables), not {tenancy!r}"
        )
    tenant = query.pop("tenant", None)
    if tenant is not None:  # checked here too: it goes into libpq's options
        tenant = check_tenant(tenant)
    taken = sorted(set(query) & set(_NOT_TAKEN))
    if taken:
        raise UnsupportedStoreURL(
            f"tenancy=shared does not take {', '.join(taken)} yet: tenants side by side "
            "connect straight to PostgreSQL, to a primary, with an events table not partitioned"
        )
    schema = query.get("schema")
    if "{tenant}" in url or "%7BTENANT%7D" in url.upper():
        raise UnsupportedStoreURL(
            "tenancy=shared places every tenant side by side in one schema: it takes no "
            "{tenant} (a place per tenant is the other placement)"
        )
    if schema is None:
        raise UnsupportedStoreURL(
            "tenancy=shared needs schema=NAME: the schema where every tenant's views are "
            "(its tables go in NAME__rows)"
        )
    if not re.fullmatch(r"[a-z_][a-z0-9_]*", schema) or len(schema) > _MOST_SCHEMA:
        raise UnsupportedStoreURL(
            f"with tenancy=shared, schema is lowercase letters, digits and '_', at most "
            f"{_MOST_SCHEMA} (its tables' schema adds {ROWS_SUFFIX!r}), not {schema!r}"
        )
    shared_url = urlunsplit(parts._replace(query=urlencode({**query, TENANCY_OPTION: SHARED})))
    plain = PostgresTarget.from_url(urlunsplit(parts._replace(query=urlencode(query))))
    target = TenantTarget(
        plain.conninfo, plain.schema, plain.pool_size, plain.pool_timeout, tenant=tenant or ""
    )
    return SideBySide(tenant, schema, schema + ROWS_SUFFIX, target, shared_url)


def tenant_url(url: str, tenant: str) -> str:
    """The side-by-side URL `url` (of every tenant) naming `tenant` (`?tenant=`)."""
    parts = urlsplit(url)
    items = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "tenant"]
    return urlunsplit(parts._replace(query=urlencode([*items, ("tenant", tenant)])))


def rows_url(shared: SideBySide) -> str:
    """A plain store URL of the tables' schema, for what works on it whole (the key table)."""
    parts = urlsplit(shared.url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    query.pop(TENANCY_OPTION)
    query["schema"] = shared.rows
    return urlunsplit(parts._replace(query=urlencode(query)))
