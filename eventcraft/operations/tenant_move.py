"""A tenant moved from its place under one URL template to its place under another, from
the shell: its log copied (`eventstore.move_tenant`), the checkpoints of its read models
kept in a database of their own carried (`projections.carry_checkpoints`), and its old
place dropped only when asked.

Read models kept in the tenant's store (an App without `database`) stay at the old place
with their checkpoints: at the new place its runners begin again from the start, into
new tables there, so each event still changes them once. Those in a database of their
own (`App.database`, with `{tenant}`) stay where they are, their checkpoints carried to
the new log, so that their runners go on where they stopped.

Stop what serves the tenant (its writers, runners, relays) before a move: a runner still
holding its lease refuses the carry, and a checkpoint past the copy (events written at
the old place after the move began) too. The move may be run again: what was copied is
not copied twice, and checkpoints carried once are not carried again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from eventcraft.eventstore import (
    EventStore,
    InvalidTenant,
    TenantDrop,
    TenantMove,
    TenantPlace,
    redacted,
)
from eventcraft.eventstore import move_tenant as move_tenant_log
from eventcraft.projections import CarriedCheckpoints, Database, ProjectionError, carry_checkpoints

from .errors import InputError, Problems
from .tenants import app_for_tenant, drop_tenant, is_template, place_of, plan_drop, tenant_url

if TYPE_CHECKING:
    from ..app import App


@dataclass(frozen=True)
class MovePlan:
    """Where a tenant's move goes: its place now, and its place under the other template."""

    tenant: str
    source: TenantPlace
    """Its place under the store's template; kept unless the move drops it."""
    destination: TenantPlace
    """Its place under the template it moves to."""


@dataclass(frozen=True)
class MoveDone:
    """What a tenant's move did."""

    plan: MovePlan
    moved: TenantMove
    """The copy of its log: events, deletions, snapshots, each event's new position."""
    carried: CarriedCheckpoints | None
    """Its read models' checkpoints carried to the new log; None when they are kept in the
    tenant's store (or no App was given), which the move leaves at the old place."""
    dropped: TenantDrop | None
    """The old place dropped, when asked."""


def plan_move(template: str, tenant: str, to_template: str) -> MovePlan:
    """Where moving `tenant` from `template` to `to_template` goes; `NotFound` if
    `template`'s placement holds no store of it, `InputError` for a `to_template` without
    `{tenant}` or one that places the tenant where it is, `InvalidTenant` for a tenant id
    the store refuses. Nothing is opened at the destination."""
    if not is_template(to_template):
        raise InputError(
            f"--to {redacted(to_template)!r} is one store, not a store per tenant: name each "
            "tenant's place there with {tenant} (sqlite:///tenants/{tenant}.db, "
            "postgresql://host/db?schema=shop_{tenant})"
        )
    source = plan_drop(template, tenant)  # there, or NotFound
    destination = place_of(to_template, tenant)
    if source.where == destination.where:
        raise InputError(
            f"tenant {tenant!r} is at {source.kind} {source.name} under both templates: a "
            "move goes from one place to another"
        )
    return MovePlan(tenant, source, destination)


def move_tenant(
    template: str,
    tenant: str,
    to_template: str,
    *,
    app: App | None = None,
    drop_source: bool = False,
) -> MoveDone:
    """Move `tenant` from its place under `template` to its place under `to_template`:
    its log copied, positions renumbered there; with `app`, the checkpoints of its read
    models kept in a database of their own (`App.database`) carried to the new log; with
    `drop_source`, its old place dropped once all that is done. The plan is checked again
    first (`plan_move`): the tenant must be there still.

    `InputError` (nothing written) for a destination holding another log; `Problems` for
    checkpoints that cannot be carried yet (a runner holds one, or one is past the copy):
    the log is copied, nothing is dropped, and the move run again, once they are stopped,
    carries them."""
    plan = plan_move(template, tenant, to_template)
    try:
        moved = move_tenant_log(tenant, template, to_template)
    except InvalidTenant as error:
        raise InputError(str(error)) from None
    carried = None
    tenant_app = app_for_tenant(app, tenant) if app is not None else None
    if tenant_app is not None and tenant_app.database:
        carried = _carry(tenant_app.database, tenant_url(to_template, tenant), moved)
    dropped = drop_tenant(template, tenant) if drop_source else None
    return MoveDone(plan, moved, carried, dropped)


def _carry(database_url: str, destination_url: str, moved: TenantMove) -> CarriedCheckpoints:
    """The checkpoints in the tenant's read-model database carried to the moved log."""
    with EventStore.open(destination_url) as destination:
        database = Database.of(database_url, destination)
        try:
            return carry_checkpoints(database, moved.positions)
        except ProjectionError as error:
            raise Problems(
                f"the log was copied, its checkpoints not carried: {error}; run the move "
                "again once that is put right"
            ) from None
        finally:
            database.close()
