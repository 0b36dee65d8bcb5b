"""`eventcraft schema export|check|verify`: the App's events as a committed contract, checked
before deploying and against what is stored."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, get_args

import click

from eventcraft.domain import CompatibilityMode, compatibility_report

from ..operations import schema as operations
from ..operations.errors import InputError, Problems
from ..operations.numbers import MAX_AFTER
from .output import console, counted, emit_json, json_option, progress, table
from .shell import shell

F = TypeVar("F", bound=Callable[..., Any])


def _app_option(command: F) -> F:
    """`--app` on the command itself too, as `eventcraft schema check --app svc:app` reads."""

    def given(context: click.Context, _: click.Parameter, value: str | None) -> None:
        if value:
            shell().app_reference = value

    return click.option(
        "--app",
        metavar="MODULE:NAME",
        expose_value=False,
        callback=given,
        help="The service's eventcraft.App (as the global --app).",
    )(command)


@click.group(
    epilog="\b\nExamples:\n"
    "  eventcraft schema export --app shop.app:app --output events.schema.json\n"
    "  eventcraft schema check --app shop.app:app --against events.schema.json\n"
    "  eventcraft schema verify --app shop.app:app --store postgresql://db/shop"
)
def schema() -> None:
    """The App's event catalog: export it, check a change against it, verify the stored log."""


@schema.command(
    epilog="\b\nExamples:\n"
    "  eventcraft schema export --app shop.app:app --output events.schema.json\n"
    "  eventcraft --app shop.app:app schema export > catalog.json"
)
@_app_option
@click.option(
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="Write the catalog to FILE, keeping the older versions' schemas and the retired "
    "types of the catalog already there [default: stdout].",
)
@click.option("--force", is_flag=True, help="Replace FILE even if it is not a catalog.")
def export(output: Path | None, force: bool) -> None:
    """Write the catalog of the App's events: each type, its versions' JSON Schemas, its
    upcasters, its personal fields and who reads it, in a stable form to commit."""
    catalog = operations.export(shell().app(), output, force=force)
    if output is None:
        sys.stdout.write(catalog.to_json())
        return
    retired = f", {counted(len(catalog.retired), 'retired type')}" if catalog.retired else ""
    console().print(f"wrote {counted(len(catalog.types), 'event type')}{retired} to {output}")


@schema.command(
    epilog="\b\nExamples:\n"
    "  eventcraft schema check --app shop.app:app --against events.schema.json\n"
    "  eventcraft schema check --against events.schema.json --mode full --json"
)
@_app_option
@click.option(
    "--against",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="The committed catalog (`schema export --output FILE`).",
)
@click.option(
    "--mode",
    type=click.Choice(get_args(CompatibilityMode)),
    default="backward",
    show_default=True,
    help="backward: today's code reads the stored events; forward: the committed code "
    "reads today's; full: both.",
)
@json_option
def check(against: Path, mode: CompatibilityMode, as_json: bool) -> None:
    """Check the App's events against the committed catalog: exit 1, a line a problem and
    the upcasters to write, when a change would break reading stored events."""
    found = operations.check(shell().app(), against, mode)
    if as_json:
        emit_json({"mode": mode, "against": str(against), "problems": found})
    elif found:
        console().print(compatibility_report(found, against=str(against)))
    else:
        console().print(f"ok: the App's events are {mode} compatible with {against}")
    if found:
        raise Problems(f"schema check found {counted(len(found), 'incompatible change')}")


@schema.command(
    epilog="\b\nExamples:\n"
    "  eventcraft schema verify --app shop.app:app --store postgresql://db/shop\n"
    "  eventcraft schema verify --sample 100000 --json"
)
@_app_option
@click.option(
    "--after", type=click.IntRange(0, MAX_AFTER), default=0, help="Start after this position."
)
@click.option("--limit", type=click.IntRange(min=1), help="Read at most this many events.")
@click.option(
    "--sample",
    type=click.IntRange(min=1),
    metavar="N",
    help="Read about N events, in windows spread over the log, instead of all.",
)
@click.option(
    "--spark",
    "in_spark",
    is_flag=True,
    help="Run it as a Spark job over the whole log (and its archive, after retention): "
    "for a log too large for one process. Needs the spark extra.",
)
@click.option(
    "--master",
    default="local[*]",
    show_default=True,
    metavar="URL",
    help="With --spark: the Spark master.",
)
@json_option
def verify(
    after: int,
    limit: int | None,
    sample: int | None,
    in_spark: bool,
    master: str,
    as_json: bool,
) -> None:
    """Decode and upcast the stored events through the App's registry: how many of each
    type and stored version there are, and which fail (exit 1 if any)."""
    context = shell()
    app = context.app()
    if in_spark:
        if after or limit is not None or sample is not None:
            raise InputError("--spark reads the whole log: drop --after, --limit and --sample")
        context.store()  # a store that is not there is refused here, not in a Spark job
        found = operations.verify_in_spark(context.url(), app, master)
    else:
        store = context.store()
        with progress("schema verify", None):
            found = operations.verify(store, app, after=after, limit=limit, sample=sample)
    if as_json:
        emit_json({**dataclasses.asdict(found), "ok": found.ok})
    else:
        out = console()
        out.print(
            table(
                ("type", "stored version", "reads as", "events", "failed", "first failure", "last"),
                (
                    (
                        c.event_type,
                        c.version,
                        "-" if c.registered_version is None else c.registered_version,
                        c.events,
                        c.failed,
                        c.first_failure,
                        c.last_position,
                    )
                    for c in found.counts
                ),
            )
        )
        for c in found.counts:
            if c.error is not None:
                out.print(f"{c.event_type} v{c.version} at position {c.first_failure}: {c.error}")
        how = "sampled " if found.sampled else ""
        out.print(
            f"{'ok' if found.ok else 'failed'}: {how}{counted(found.events, 'event')} after "
            f"position {found.after} up to {found.upto}, {found.failed} failed"
        )
    if not found.ok:
        verb = "does" if found.failed == 1 else "do"
        raise Problems(f"schema verify found {counted(found.failed, 'event')} that {verb} not read")
