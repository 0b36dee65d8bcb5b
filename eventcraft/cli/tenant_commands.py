"""`eventcraft tenant ...`: the tenants of a store URL that names each tenant's place with
`{tenant}`, listed, one moved to its place under another template, and one dropped whole."""

from __future__ import annotations

import click

from eventcraft.eventstore import TenantDrop, TenantPlace

from ..operations import tenant_move
from ..operations import tenants as operations
from ..operations.errors import InputError
from .output import console, emit_json, json_option, table
from .shell import shell, yes_option


@click.group(
    epilog="\b\nExamples:\n  eventcraft --store 'sqlite:///tenants/{tenant}.db' tenant list\n"
    "  eventcraft --store 'postgresql://db/app?schema=shop_{tenant}' tenant drop acme --yes\n"
    "  eventcraft --store 'sqlite:///tenants/{tenant}.db' tenant move acme "
    "--to 'postgresql://db/app?schema=shop_{tenant}' --yes"
)
def tenant() -> None:
    """List, move and drop the tenants of a store URL that names each tenant's place with
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
    wrote; with --app keeping read models in a database of their own (App.database with
    {tenant}), the tenant's place there too. Stop what serves the tenant first. Refused
    without --yes."""
    found = shell()
    if found.tenant is not None and found.tenant != tenant_id:
        raise InputError(
            f"tenant drop {tenant_id} under --tenant {found.tenant}: name one tenant, "
            "not two (leave out --tenant, or EVENTCRAFT_TENANT)"
        )
    template = found.template()
    planned = operations.plan_drop(template, tenant_id)
    app = found.app() if found.app_reference else None
    models = operations.read_models_place(app, tenant_id)
    if models is not None and models.where == planned.where:
        models = None  # its read models are in its store's place
    if not yes:  # never asked at a prompt: a tenant is dropped only when --yes says so
        also = "" if models is None else f" and its read models' {models.kind} {models.name}"
        raise InputError(
            f"dropping tenant {tenant_id!r} removes its {planned.kind} {planned.name}{also} "
            "and everything in it, for ever: pass --yes to drop it"
        )
    # The read models first: a drop stopped between the two is run again while the
    # tenant's store is still there to be found.
    dropped_models = operations.drop_read_models(app, tenant_id, planned)
    done = operations.drop_tenant(template, tenant_id)
    if as_json:
        emit_json(
            {
                **_dropped(done),
                "read_models": None if dropped_models is None else _dropped(dropped_models),
            }
        )
        return
    if dropped_models is not None:
        console().print(
            f"removed its read models' {dropped_models.place.kind} {dropped_models.place.name}"
            + ("" if dropped_models.existed else " (it was gone already)")
        )
    console().print(
        f"dropped tenant {tenant_id!r}: removed its {done.place.kind} {done.place.name}"
        + (" and everything in it" if done.existed else " (it was gone already)")
    )
    for archive in done.archives:
        console().print(f"removed its archive {archive}")


@tenant.command(
    "move",
    epilog="\b\nExamples:\n"
    "  eventcraft --store 'sqlite:///tenants/{tenant}.db' tenant move acme \\\n"
    "      --to 'postgresql://db/app?schema=shop_{tenant}' --yes\n"
    "  eventcraft --store 'postgresql://db/app_{tenant}' --app shop:app tenant move acme \\\n"
    "      --to 'postgresql://db2/app_{tenant}' --yes --drop-source --json",
)
@click.argument("tenant_id", metavar="TENANT")
@click.option(
    "--to",
    "to_template",
    required=True,
    metavar="TEMPLATE",
    help="The store URL naming each tenant's new place with {tenant}.",
)
@click.option(
    "--drop-source",
    is_flag=True,
    help="Drop the tenant's old place once its log is copied and its checkpoints carried.",
)
@yes_option
@json_option
def move(tenant_id: str, to_template: str, drop_source: bool, yes: bool, as_json: bool) -> None:
    """Move TENANT to its place under TEMPLATE: its whole log copied there (events,
    deletions, snapshots, personal fields sealed again with keys there), positions
    renumbered, and, with --app, the checkpoints of read models kept in a database of
    their own (App.database) carried to the new positions. The old place is kept unless
    --drop-source. Stop what serves the tenant first. Refused without --yes; run again
    after a stop, it goes on where the copy ended."""
    found = shell()
    if found.tenant is not None and found.tenant != tenant_id:
        raise InputError(
            f"tenant move {tenant_id} under --tenant {found.tenant}: name one tenant, "
            "not two (leave out --tenant, or EVENTCRAFT_TENANT)"
        )
    template = found.template()
    planned = tenant_move.plan_move(template, tenant_id, to_template)
    if not yes:  # never asked at a prompt, as tenant drop
        raise InputError(
            f"moving tenant {tenant_id!r} copies its {planned.source.kind} "
            f"{planned.source.name} to {planned.destination.kind} {planned.destination.name}"
            + (", then drops the old one for ever" if drop_source else "")
            + ": pass --yes to move it"
        )
    app = found.app() if found.app_reference else None
    done = tenant_move.move_tenant(
        template, tenant_id, to_template, app=app, drop_source=drop_source
    )
    if as_json:
        emit_json(_moved(done))
        return
    moved = done.moved
    console().print(
        f"moved tenant {tenant_id!r} to its {planned.destination.kind} "
        f"{planned.destination.name}: {moved.events} events"
        + (f" ({moved.written} copied now, the rest before)" if moved.resumed else "")
        + f", {moved.deletions} deletions, {moved.snapshots} snapshots"
    )
    if done.carried is not None:
        if done.carried.already:
            console().print("its checkpoints were carried before")
        for name, (old, new) in done.carried.checkpoints.items():
            console().print(f"checkpoint {name}: {old} -> {new}")
    elif app is None:
        console().print(
            "no --app given: checkpoints of read models kept in a database of their own "
            "were not carried"
        )
    if done.dropped is not None:
        console().print(f"dropped its old {done.dropped.place.kind} {done.dropped.place.name}")
    else:
        console().print(f"its old {planned.source.kind} {planned.source.name} is kept")


def _place(place: TenantPlace) -> dict[str, str]:
    """A tenant's place for JSON: its URL is left out (it may hold a password)."""
    return {"tenant": place.tenant, "kind": place.kind, "place": place.name}


def _dropped(done: TenantDrop) -> dict[str, object]:
    return {**_place(done.place), "existed": done.existed, "archives": list(done.archives)}


def _moved(done: tenant_move.MoveDone) -> dict[str, object]:
    moved = done.moved
    carried = done.carried
    return {
        "tenant": done.plan.tenant,
        "from": _place(done.plan.source),
        "to": _place(done.plan.destination),
        "events": moved.events,
        "written": moved.written,
        "resumed": moved.resumed,
        "deletions": moved.deletions,
        "snapshots": moved.snapshots,
        "resealed": moved.resealed,
        "checkpoints": None
        if carried is None
        else {name: {"from": old, "to": new} for name, (old, new) in carried.checkpoints.items()},
        "checkpoints_carried_before": carried is not None and carried.already,
        "dropped_source": done.dropped is not None,
    }
