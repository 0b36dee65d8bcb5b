"""`eventcraft tenant ...`: the tenants of a store URL that names each tenant's place with
`{tenant}`, listed, and one dropped whole."""

from __future__ import annotations

import click

from eventcraft.eventstore import TenantDrop, TenantPlace

from ..operations import tenants as operations
from ..operations.errors import InputError
from .output import console, emit_json, json_option, table
from .shell import shell, yes_option


@click.group(
    epilog="\b\nExamples:\n  eventcraft --store 'sqlite:///tenants/{tenant}.db' tenant list\n"
    "  eventcraft --store 'postgresql://db/app?schema=shop_{tenant}' tenant drop acme --yes"
)
def tenant() -> None:
    """List and drop the tenants of a store URL that names each tenant's place with
    {tenant}: a SQLite file or folder, a PostgreSQL schema or database per tenant.

    Every other command works on one tenant's store with --tenant TENANT."""


@tenant.command(
    "list",
    epilog="\b\nExamples:\n  eventcraft --store 'sqlite:///tenants/{tenant}.db' tenant list\n"
    "  EVENTCRAFT_STORE='postgresql://db/app_{tenant}' eventcraft tenant list --json",
)
@json_option
def list_tenants(as_json: bool) -> None:
    """List the tenants whose stores are in the template's places: the SQLite files (or
    folders) it names, or the PostgreSQL schemas or databases named with its prefix."""
    template = shell().template()
    found = [operations.place_of(template, name) for name in operations.list_tenants(template)]
    if as_json:
        emit_json([_place(place) for place in found])
        return
    console().print(table(("tenant", "kind", "place"), ((p.tenant, p.kind, p.name) for p in found)))


@tenant.command(
    "drop",
    epilog="\b\nExamples:\n"
    "  eventcraft --store 'sqlite:///tenants/{tenant}.db' tenant drop acme --yes\n"
    "  eventcraft --store 'postgresql://db/app?schema=shop_{tenant}' tenant drop acme --yes --json",
)
@click.argument("tenant_id", metavar="TENANT")
@yes_option
@json_option
def drop(tenant_id: str, yes: bool, as_json: bool) -> None:
    """Drop TENANT whole: its schema, database, file or folder with everything in it
    (events, snapshots, keys, read models kept there) and the archive its retention runs
    wrote. Stop what serves the tenant first. Refused without --yes."""
    found = shell()
    if found.tenant is not None and found.tenant != tenant_id:
        raise InputError(
            f"tenant drop {tenant_id} under --tenant {found.tenant}: name one tenant, "
            "not two (leave out --tenant, or EVENTCRAFT_TENANT)"
        )
    template = found.template()
    planned = operations.plan_drop(template, tenant_id)
    if not yes:  # never asked at a prompt: a tenant is dropped only when --yes says so
        raise InputError(
            f"dropping tenant {tenant_id!r} removes its {planned.kind} {planned.name} and "
            "everything in it, for ever: pass --yes to drop it"
        )
    done = operations.drop_tenant(template, tenant_id)
    if as_json:
        emit_json(_dropped(done))
        return
    console().print(
        f"dropped tenant {tenant_id!r}: removed its {done.place.kind} {done.place.name}"
        + (" and everything in it" if done.existed else " (it was gone already)")
    )
    for archive in done.archives:
        console().print(f"removed its archive {archive}")


def _place(place: TenantPlace) -> dict[str, str]:
    """A tenant's place for JSON: its URL is left out (it may hold a password)."""
    return {"tenant": place.tenant, "kind": place.kind, "place": place.name}


def _dropped(done: TenantDrop) -> dict[str, object]:
    return {**_place(done.place), "existed": done.existed, "archives": list(done.archives)}
