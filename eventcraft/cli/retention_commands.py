"""`eventcraft retention plan|apply`: what a retention run would remove, and the run, which
archives the log up to its mark first. With `--app`, the mark stops at the slowest of the
App's projections, which then never meet a hole in the store."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import click

from ..operations.errors import InputError
from ..operations.numbers import whole_number
from .output import console, emit_json, json_option, table
from .shell import confirmed, shell, yes_option

EXAMPLES = (
    "\b\nExamples:\n  eventcraft --store postgresql://db/app retention plan --archive /srv/archive "
    "--keep order:age=90d --keep audit:count=1000\n"
    "  eventcraft --app svc.app:app retention apply --archive /srv/archive "
    "--keep order:age=90d --truncate cart-7:12 --yes"
)
_AGE = re.compile(r"(\d+)([dhms])", re.ASCII)
_UNITS = {"d": "days", "h": "hours", "m": "minutes", "s": "seconds"}


def _options(command: Any) -> Any:
    command = click.option(
        "--archive", required=True, metavar="DIR", help="The Parquet archive (a local folder)."
    )(command)
    command = click.option(
        "--keep",
        "keeps",
        multiple=True,
        metavar="CATEGORY:age=30d,count=N",
        help="A category's policy: remove events older than the age, or beyond each "
        "stream's newest N (repeatable).",
    )(command)
    command = click.option(
        "--truncate",
        "truncations",
        multiple=True,
        metavar="STREAM:VERSION",
        help="Remove a stream's events before this version (repeatable).",
    )(command)
    command = click.option(
        "--up-to", type=click.IntRange(min=0), help="Remove nothing beyond this position."
    )(command)
    return command


@click.group(epilog=EXAMPLES)
def retention() -> None:
    """Archive and remove old events by policy; each run is recorded."""


@retention.command(epilog=EXAMPLES)
@_options
@json_option
def plan(
    archive: str,
    keeps: tuple[str, ...],
    truncations: tuple[str, ...],
    up_to: int | None,
    as_json: bool,
) -> None:
    """Show what a run would archive and remove now; change nothing."""
    from ..operations import retention as operations

    rules = _rules(keeps, truncations)
    store = shell().store()
    planned = operations.plan(store, *rules, archive, **_bounds(up_to))
    _warn_unless_app()
    if as_json:
        emit_json(planned)
        return
    _show(planned)


@retention.command(epilog=EXAMPLES)
@_options
@click.option(
    "--pace",
    type=click.FloatRange(min=0, max=1, min_open=True),
    default=1.0,
    show_default=True,
    help="The share of the time the run works, resting the rest, so that appends keep more "
    "of the machine (PostgreSQL; SQLite's appends wait for a run whatever its pace).",
)
@yes_option
@json_option
def apply(
    archive: str,
    keeps: tuple[str, ...],
    truncations: tuple[str, ...],
    up_to: int | None,
    pace: float,
    yes: bool,
    as_json: bool,
) -> None:
    """Archive the log up to the mark, then remove what the rules name below it."""
    from ..operations import retention as operations

    policies, cuts = _rules(keeps, truncations)
    store = shell().store()
    bounds = _bounds(up_to)
    planned = operations.plan(store, policies, cuts, archive, **bounds)
    _warn_unless_app()
    if not as_json:
        _show(planned)
    removed = sum(r.events for r in planned.removals)
    confirmed(f"Archive up to position {planned.up_to} and remove about {removed} events?", yes)
    done = operations.apply(store, policies, cuts, archive, pace=pace, **bounds)
    if as_json:
        emit_json(done)
        return
    console().print(
        f"run {done.run.run}: archived {done.archived} events, removed {done.run.removed}; "
        f"the store's log is whole from position {done.run.up_to + 1} (low-water mark "
        f"{done.run.up_to})"
    )


def _bounds(up_to: int | None) -> dict[str, Any]:
    """The run's bounds: `up_to`, and the checkpoints of the App's projections, if one is
    named (`--app`)."""
    found = shell()
    bounds: dict[str, Any] = {"up_to": up_to}
    if found.app_reference:
        from ..operations import projections

        states = projections.status(found.store(), found.app())
        bounds["checkpoints"] = {state.name: state.position for state in states}
    return bounds


def _warn_unless_app() -> None:
    """Say that the projections' checkpoints were not read: their read models may live in
    a database of their own, which only the App names, so without one the mark may pass
    them. On stderr, so that --json stays one document; after the plan, so that an error
    stays the one line."""
    if not shell().app_reference:
        click.echo(
            "warning: projections not consulted: give --app to keep the mark at or below "
            "their checkpoints",
            err=True,
        )


def _show(planned: Any) -> None:
    out = console()
    held = f", held by projection {planned.held_by!r}" if planned.held_by else ""
    out.print(
        f"head {planned.head}; a run archives up to position {planned.up_to}{held} "
        f"(the archive at {planned.archive} ends at {planned.archived_to}; the last run's "
        f"mark is {planned.low_water_mark})"
    )
    out.print(table(("rule", "events removed"), ((r.rule, r.events) for r in planned.removals)))


def _rules(keeps: tuple[str, ...], truncations: tuple[str, ...]) -> tuple[list[Any], list[Any]]:
    """The rules as typed; what the store's own checks refuse is said of the flag and the
    text typed, not of the Python arguments they were made into."""
    from eventcraft.eventstore import InvalidEvent
    from eventcraft.eventstore.retention import RetentionPolicy, Truncation

    policies = []
    for keep in keeps:
        category, _, spec = keep.partition(":")
        limits: dict[str, Any] = {}
        for part in filter(None, spec.split(",")):
            name, _, value = part.partition("=")
            if name == "age" and (match := _AGE.fullmatch(value)):
                amount = whole_number(match.group(1), f"--keep {keep!r}: age", least=1)
                limits["max_age"] = _age(keep, amount, match.group(2))
            elif name == "count":
                limits["max_count"] = whole_number(value, f"--keep {keep!r}: count", least=1)
            else:
                raise InputError(f"--keep {keep!r}: write CATEGORY:age=30d,count=100")
        if not limits:
            raise InputError(f"--keep {keep!r}: give age=30d, count=N or both after CATEGORY:")
        try:
            policies.append(RetentionPolicy(category, **limits))
        except InvalidEvent as refused:
            raise InputError(f"--keep {keep!r}: {refused}") from None
    cuts = []
    for truncation in truncations:
        stream, _, version = truncation.rpartition(":")
        if not stream or not version:
            raise InputError(f"--truncate {truncation!r}: write STREAM:VERSION")
        before = whole_number(version, f"--truncate {truncation!r}: VERSION")
        try:
            cuts.append(Truncation(stream, before))
        except InvalidEvent as refused:
            raise InputError(f"--truncate {truncation!r}: {refused}") from None
    return policies, cuts


def _age(keep: str, amount: int, unit: str) -> timedelta:
    try:
        return timedelta(**{_UNITS[unit]: amount})
    except OverflowError:
        raise InputError(f"--keep {keep!r}: an age must be under 2.7 million years") from None
