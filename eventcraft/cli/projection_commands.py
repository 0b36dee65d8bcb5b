"""`eventcraft projections ...`: the App's projections' lag, catch-up, rebuild, and their
parked events retried or discarded."""

from __future__ import annotations

import sys

import click

from ..operations import projections as operations
from ..operations.errors import Problems
from .output import console, emit_json, json_option, progress, table, when
from .shell import confirmed, opened, yes_option

POSITION = click.IntRange(min=1)


@click.group(
    epilog="\b\nExamples:\n  eventcraft --app myservice.app:app projections status\n"
    "  eventcraft --app myservice.app:app projections parked balances"
)
def projections() -> None:
    """See and operate the App's projections: lag, catch-up, rebuild, parked events."""


@projections.command(
    epilog="\b\nExamples:\n  eventcraft --app svc.app:app projections status --json"
)
@json_option
def status(as_json: bool) -> None:
    """Show each projection's checkpoint, lag, lease, parked events and stop."""
    found = operations.status(*opened())
    if as_json:
        emit_json(found)
        return
    console().print(
        table(
            (
                "projection",
                "kind",
                "checkpoint",
                "head",
                "lag",
                "lag (s)",
                "generation",
                "lease held by",
                "parked",
                "state",
            ),
            (
                (
                    s.name,
                    s.kind,
                    s.position,
                    s.head,
                    f"{s.lag_events}+" if s.lag_capped else s.lag_events,
                    f"{s.lag_seconds:.1f}",
                    s.generation,
                    s.owner,
                    s.parked,
                    _state(s),
                )
                for s in found
            ),
        )
    )


@projections.command(
    "catch-up",
    epilog="\b\nExamples:\n  eventcraft --app svc.app:app projections catch-up\n"
    "  eventcraft --app svc.app:app projections catch-up balances",
)
@click.argument("name", required=False)
@json_option
def catch_up(name: str | None, as_json: bool) -> None:
    """Apply the log up to its head to one projection, or to all, here and now.

    A projection another runner holds the lease of is left to it. Exits 1 if a
    failing event stops one (it is parked: see `projections parked`).
    """
    store, app = opened()
    names = [name] if name else []
    with progress("catching up", operations.lag(store, app, names) or None) as advance:
        done = operations.catch_up(store, app, names, progress=advance)
    if as_json:
        emit_json(done)
    else:
        console().print(
            table(
                ("projection", "from", "to", "note"),
                (
                    (
                        c.name,
                        c.before,
                        c.after,
                        c.stopped or (f"left to {c.held_by}" if c.held_by else ""),
                    )
                    for c in done
                ),
            )
        )
    stopped = [c.stopped for c in done if c.stopped]
    if stopped:
        raise Problems("; ".join(stopped))


@projections.command(
    epilog="\b\nExamples:\n  eventcraft --app svc.app:app projections rebuild balances --yes"
)
@click.argument("name")
@yes_option
def rebuild(name: str, yes: bool) -> None:
    """Replay a projection from the start of the log into new tables, then swap them in.

    The old tables serve queries until the swap; if a handler fails, nothing
    is swapped (exit 1).
    """
    store, app = opened()
    found = operations.state(store, app, name)
    confirmed(
        f"Rebuild {found.kind} {name!r} (generation {found.generation}, at {found.position}) "
        "from the start of the log?",
        yes,
    )
    done = operations.rebuild(store, app, name, progress=sys.stdout.isatty())
    console().print(
        f"rebuilt {done.name}: generation {done.generation} serves, at position "
        f"{done.position}, {done.events} events in {done.seconds:.1f} s"
    )


@projections.command(
    epilog="\b\nExamples:\n  eventcraft --app svc.app:app projections parked\n"
    "  eventcraft --app svc.app:app projections parked balances --json"
)
@click.argument("name", required=False)
@json_option
def parked(name: str | None, as_json: bool) -> None:
    """List the events a projection's handler failed on (of one projection, or all)."""
    found = operations.parked(*opened(), name)
    if as_json:
        emit_json(found)
        return
    console().print(
        table(
            (
                "projection",
                "position",
                "stream",
                "version",
                "type",
                "tries",
                "parked at (UTC)",
                "error",
            ),
            (
                (
                    p.projection,
                    p.position,
                    p.stream_id,
                    p.version,
                    p.type,
                    p.attempts,
                    when(p.parked_at),
                    p.error,
                )
                for p in found
            ),
        )
    )


@projections.command(
    epilog="\b\nExamples:\n  eventcraft --app svc.app:app projections retry balances 1042"
)
@click.argument("name")
@click.argument("position", type=POSITION)
@yes_option
def retry(name: str, position: int, yes: bool) -> None:
    """Apply a parked event again; once it succeeds it leaves the error store.

    Exits 1 if the handler fails again (the event stays parked).
    """
    store, app = opened()
    found = operations.parked_event(store, app, name, position)
    confirmed(
        f"Apply the {found.type} at position {position} ({found.stream_id} v{found.version}) "
        f"to {name!r} again? It failed with {found.error}",
        yes,
    )
    done = operations.retry_parked(store, app, name, position)
    console().print(
        f"retried: the event at position {position} is applied to {name!r} "
        f"(checkpoint {done.checkpoint}, {done.parked_left} parked)"
    )


@projections.command(
    epilog="\b\nExamples:\n  eventcraft --app svc.app:app projections discard balances 1042 --yes"
)
@click.argument("name")
@click.argument("position", type=POSITION)
@yes_option
def discard(name: str, position: int, yes: bool) -> None:
    """Forget a parked event without applying it; a projection it stopped moves on."""
    store, app = opened()
    found = operations.parked_event(store, app, name, position)
    confirmed(
        f"Discard the {found.type} at position {position} ({found.stream_id} v{found.version}) "
        f"parked by {name!r}? It will never be applied to it",
        yes,
    )
    done = operations.discard_parked(store, app, name, position)
    console().print(
        f"discarded: the event at position {position} is no longer parked for {name!r} "
        f"(checkpoint {done.checkpoint}, {done.parked_left} parked)"
    )


def _state(found: operations.ProjectionState) -> str:
    if found.never_run:
        return "never run"
    if found.stopped_at is not None:
        return f"stopped at {found.stopped_at}"
    return "current" if found.lag_events == 0 else "behind"
