"""Tenants from the shell: one tenant's store opened from a URL template with `{tenant}`
(the store's `?tenant=`), the tenants a template's placement holds, and a tenant dropped
whole.

A template names where every tenant's store is (`sqlite:///tenants/{tenant}.db`,
`postgresql://db/shop?schema=shop_{tenant}`); a command that works on one store is
given one tenant's, never the template's, and a tenant id is checked (`check_tenant`)
before anything is opened.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote_plus

from eventcraft.eventstore import (
    EventStore,
    InvalidTenant,
    TenantDrop,
    TenantPlace,
    Tenants,
    check_tenant,
    redacted,
    tenant_place,
)

from .errors import InputError, NotFound

if TYPE_CHECKING:
    from ..app import App

TENANT = "{tenant}"
"""Where a template puts the tenant's name."""
_TENANT_OPTION = "tenant"
_TEMPLATE = re.compile(r"\{tenant\}|(?i:%7btenant%7d)")  # as the store reads it
_SIDE_BY_SIDE = re.compile(r"[?&]tenancy=")  # every tenant in one schema's tables


def is_template(url: str) -> bool:
    """Whether `url` names a store per tenant, with `{tenant}` (as written, or
    percent-encoded as some tools write it: the store reads both), or holds every tenant
    side by side (`?tenancy=shared`: the store checks its value)."""
    return _TEMPLATE.search(url) is not None or _SIDE_BY_SIDE.search(url) is not None


def tenant_option(url: str) -> str | None:
    """The tenant a URL names with `?tenant=`, or None."""
    _, mark, query = url.partition("?")
    for item in query.split("&") if mark else []:
        key, _, value = item.partition("=")
        if key == _TENANT_OPTION:
            return unquote_plus(value)
    return None


def template_of(url: str) -> str:
    """`url` without its `tenant=` option: the template it fills."""
    base, mark, query = url.partition("?")
    kept = [item for item in query.split("&") if item and item.partition("=")[0] != _TENANT_OPTION]
    return f"{base}?{'&'.join(kept)}" if mark and kept else base


def tenant_url(template: str, tenant: str) -> str:
    """The URL of `tenant`'s store: `template` with `?tenant=`. `InvalidTenant` for a
    tenant id the store refuses; `InputError` for a URL without `{tenant}`, or one that
    names a tenant already.
    """
    check_tenant(tenant)
    if not is_template(template):
        raise InputError(
            f"{redacted(template)!r} is one store, not a store per tenant: name each tenant's "
            "place with {tenant} (sqlite:///tenants/{tenant}.db, "
            "postgresql://host/db?schema=shop_{tenant})"
        )
    if tenant_option(template) is not None:
        raise InputError(f"{redacted(template)!r} names its tenant with ?tenant= already")
    separator = "&" if "?" in template else "?"
    return f"{template}{separator}{_TENANT_OPTION}={quote(tenant, safe='')}"


def place_of(template: str, tenant: str) -> TenantPlace:
    """Where `tenant`'s store is under `template`, as its `?tenant=` URL opens it (nothing
    is connected to)."""
    place = tenant_place(tenant_url(template, tenant))
    assert place is not None, "a URL with ?tenant= names a tenant's place"
    return place


def list_tenants(template: str) -> list[str]:
    """The tenants whose stores `template`'s placement holds, sorted (`Tenants.known`)."""
    if not is_template(template):
        raise InputError(
            f"{redacted(template)!r} is one store: tenants are listed from a URL that names "
            "each tenant's place with {tenant}"
        )
    with Tenants(template) as tenants:
        return tenants.known()


def plan_drop(template: str, tenant: str) -> TenantPlace:
    """The place dropping `tenant` would remove, with everything in it; `NotFound` if the
    template's placement holds no store of it (nothing is made to be dropped)."""
    place = place_of(template, tenant)
    if tenant not in list_tenants(template):
        raise NotFound(
            f"there is no tenant {tenant!r} in {redacted(template)!r}: its {place.kind} "
            f"{place.name} is not there (list the tenants to see which there are)"
        )
    return place


def drop_tenant(template: str, tenant: str) -> TenantDrop:
    """Remove everything of `tenant` (`EventStore.drop_tenant`): its place with every table
    in it, read models kept there included, and its archive. Re-checks that the tenant is
    there first: a tenant dropped meanwhile is `NotFound`, not made to be dropped again.
    """
    plan_drop(template, tenant)
    store = EventStore.open(tenant_url(template, tenant))
    try:
        return store.drop_tenant()
    except BaseException:
        store.close()
        raise


def read_models_place(app: App | None, tenant: str) -> TenantPlace | None:
    """Where `app` keeps `tenant`'s read models when that is a place of their own
    (`App.database` with `{tenant}`), which dropping the tenant's store does not remove;
    None when they are in the tenant's store (or there is no app)."""
    if app is None or not app.database:
        return None
    app_for_tenant(app, tenant)  # InputError for a database every tenant would share
    place = place_of(app.database, tenant)
    if place.kind not in ("schema", "database", "file"):
        return None  # in this process's memory: gone with it
    return place


def drop_read_models(app: App | None, tenant: str, store: TenantPlace) -> TenantDrop | None:
    """Remove `tenant`'s read-model database of its own (`read_models_place`), unless it
    is the tenant's store place `store` (dropped with the store)."""
    place = read_models_place(app, tenant)
    if place is None or place.where == store.where:
        return None
    return place.remove()


def app_for_tenant(app: App, tenant: str) -> App:
    """`app` as it serves `tenant`: its read models' database (`App.database`), if it has
    one, the tenant's own, filled in from the `{tenant}` it must hold. `InputError` for a
    database without `{tenant}`, which every tenant would share. Without one, read models
    are kept in the tenant's store, as always."""
    if not app.database:
        return app
    if not is_template(app.database):
        raise InputError(
            f"the App keeps its read models in {redacted(app.database)!r} (App.database), "
            f"which every tenant would share: name each tenant's place there with "
            "{tenant} as in the store URL, or leave it unset to keep them in each "
            "tenant's store"
        )
    return replace(app, database=tenant_url(app.database, tenant))


def checked_tenants(given: Iterable[str]) -> list[str]:
    """The tenant ids `given`, each checked, once each; `InputError` naming the one
    refused, or for none at all."""
    tenants = [given] if isinstance(given, str) else list(given)
    if not tenants:
        raise InputError("no tenant named: give one tenant id or more")
    for tenant in tenants:
        try:
            check_tenant(tenant)
        except InvalidTenant as error:
            raise InputError(str(error)) from None
    return list(dict.fromkeys(tenants))
