"""Commands that copy and check a whole store: export, import, verify."""

from __future__ import annotations

import os
import sys
from contextlib import ExitStack
from typing import IO

import click

from ..operations import transfer
from ..operations import verify as verification
from ..operations.errors import InputError, Problems
from .output import console, emit_json, json_option, progress, table
from .shell import confirmed, shell

NOT_NEGATIVE = click.IntRange(min=0)


@click.command(
    epilog="\b\nExamples:\n  eventcraft --store sqlite:///events.db export --out events.ndjson\n"
    "  eventcraft export --after 1000 --category order --out - | gzip > orders.ndjson.gz\n"
    "  eventcraft --store postgresql://db/app export --jobs 2 --out events.ndjson"
)
@click.option("--after", type=NOT_NEGATIVE, default=0, help="Start after this position.")
@click.option("--until", type=NOT_NEGATIVE, default=None, help="Stop at this position.")
@click.option("--category", "categories", multiple=True, help="Only this category (repeatable).")
@click.option(
    "--out", "target", required=True, metavar="FILE|-", help="Where to write; - is stdout."
)
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Worker processes making the lines (a large log on a machine with cores to spare).",
)
def export(
    after: int, until: int | None, categories: tuple[str, ...], target: str, jobs: int
) -> None:
    """Write the log as NDJSON, one event a line with every field."""
    store = shell().store()
    with ExitStack() as stack:
        out: IO[bytes]
        if target == "-":
            out = sys.stdout.buffer
        else:
            try:
                out = stack.enter_context(open(target, "wb"))
            except OSError as error:
                raise InputError(f"cannot write {target!r}: {error.strerror}") from None
        total = transfer.export_span(store, after=after, until=until)
        with progress("export", total) as done:
            report = transfer.export_events(
                store,
                out,
                after=after,
                until=until,
                categories=categories,
                progress=done,
                jobs=jobs,
            )
    if target != "-":
        click.echo(f"exported {report.events} events to {target}", err=True)


@click.command(
    "import",
    epilog="\b\nExamples:\n  eventcraft --store postgresql://db/app import events.ndjson\n"
    "  eventcraft --store sqlite:///a.db export --out - | "
    "eventcraft --store postgresql://db/app import - --yes",
)
@click.argument("source", metavar="FILE|-")
@click.option("--yes", is_flag=True, help="Import into a store that holds events without asking.")
@json_option
def import_(source: str, yes: bool, as_json: bool) -> None:
    """Append an export's events, keeping ids, versions and times; idempotent by event id."""
    store = shell().store()
    with ExitStack() as stack:
        size: int | None = None
        if source == "-":
            file: IO[bytes] = sys.stdin.buffer
        else:
            try:
                file = stack.enter_context(open(source, "rb"))
                size = os.fstat(file.fileno()).st_size
            except OSError as error:
                raise InputError(f"cannot read {source!r}: {error.strerror}") from None
        held = transfer.events_in_store(store)
        if held:
            confirmed(
                f"The store already holds events (up to position {held}); events of the file it "
                "holds are skipped. Import into it?",
                yes,
                refusal=f"the store already holds events (up to position {held}): "
                "pass --yes to import into it",
                can_ask=source != "-",  # stdin is the data, not the person
            )
        with progress("import (bytes)", size) as done:
            report = transfer.import_events(store, file, progress=done)
    if as_json:
        emit_json(report)
    else:
        console().print(
            f"imported {report.events} events: {report.written} written, "
            f"{report.skipped} already in the store"
        )


@click.command(
    epilog="\b\nExamples:\n  eventcraft verify\n  eventcraft --app svc.app:app verify --json"
)
@json_option
def verify(as_json: bool) -> None:
    """Check the store: versions, positions, ids, snapshots and (with --app) checkpoints."""
    context = shell()
    store = context.store()
    app = context.app() if context.app_reference else None
    with progress("verify", store.high_water_mark()) as done:
        found = verification.verify(store, app, progress=done)
    if as_json:
        emit_json(found)
    else:
        out = console()
        projections = (
            f"{found.projections} projection checkpoints"
            if found.projections is not None
            else "projections not checked (no --app)"
        )
        summary = (
            f"{found.events} events in {found.streams} streams up to position "
            f"{found.high_water_mark}, {found.snapshots} snapshots, {projections}"
        )
        if found.ok:
            out.print(f"ok: {summary}")
        else:
            out.print(
                table(
                    ("problem", "where", "detail"),
                    ((p.kind, p.where, p.detail) for p in found.problems),
                )
            )
            out.print(summary)
    if not found.ok:
        listed = len(found.problems)
        more = f" ({listed} listed)" if listed < found.problem_count else ""
        noun = "problem" if found.problem_count == 1 else "problems"
        raise Problems(f"verify found {found.problem_count} {noun}{more}")


TRANSFER_COMMANDS = (export, import_, verify)
