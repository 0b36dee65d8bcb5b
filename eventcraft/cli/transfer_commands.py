"""Commands that copy and check a whole store: export, import, verify."""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import IO

import click

from eventcraft.eventstore import EventStore, ImportReport

from ..operations import output_files, transfer
from ..operations import verify as verification
from ..operations.errors import InputError, NotFound, Problems
from ..operations.numbers import MAX_AFTER, MAX_INT
from .output import console, counted, emit_json, json_option, progress, table
from .shell import confirmed, shell


@click.command(
    epilog="\b\nExamples:\n  eventcraft --store sqlite:///events.db export --out events.ndjson\n"
    "  eventcraft export --after 1000 --category order --out - | gzip > orders.ndjson.gz\n"
    "  eventcraft --store postgresql://db/app export --jobs 2 --out events.ndjson"
)
@click.option(
    "--after", type=click.IntRange(0, MAX_AFTER), default=0, help="Start after this position."
)
@click.option(
    "--until", type=click.IntRange(0, MAX_INT), default=None, help="Stop at this position."
)
@click.option("--category", "categories", multiple=True, help="Only this category (repeatable).")
@click.option(
    "--out",
    "target",
    required=True,
    metavar="FILE|-",
    help="Where to write; - is stdout. Never one of the store's own files; an existing "
    "file only with --force.",
)
@click.option("--force", is_flag=True, help="Replace FILE if it exists (once the export is whole).")
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Worker processes making the lines (a large log on a machine with cores to spare).",
)
def export(
    after: int,
    until: int | None,
    categories: tuple[str, ...],
    target: str,
    force: bool,
    jobs: int,
) -> None:
    """Write the log as NDJSON, one event a line with every field.

    FILE is written beside its place and takes it once the export is whole: an
    export refused or broken part-way leaves what was there."""
    transfer.check_export(after=after, until=until, jobs=jobs)
    context = shell()
    with ExitStack() as stack:
        out = (
            sys.stdout.buffer
            if target == "-"
            else stack.enter_context(output_files.new_file(target, context.url(), force=force))
        )
        store = context.store()
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
@click.option(
    "--no-check",
    "no_check",
    is_flag=True,
    help="Write from the first line, without checking the whole file first: faster, and "
    "a pipe needs no room in TMPDIR, but a line at fault stops the import there with the "
    "lines before it written (run it again once fixed to complete it).",
)
@json_option
def import_(source: str, yes: bool, no_check: bool, as_json: bool) -> None:
    """Append an export's events, keeping ids, versions and times; idempotent by event id.

    The file is checked whole before anything is written: a malformed line, or an
    event the store would refuse, is an error naming its line, and nothing is
    imported. Standard input (-) is copied to a temporary file (in TMPDIR) as it
    is checked, so it needs that much room there (--no-check skips the check).
    A store that is not there is created once the file has passed the check."""
    context = shell()
    transfer.check_import_target(context.url())
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
        try:
            store: EventStore | None = context.store()
        except NotFound:
            store = None  # created once the file has passed its check
        if store is not None and (held := transfer.events_in_store(store)):
            confirmed(
                f"The store already holds events (up to position {held}); events of the file it "
                "holds are skipped. Import into it?",
                yes,
                refusal=f"the store already holds events (up to position {held}): "
                "pass --yes to import into it",
                can_ask=source != "-",  # stdin is the data, not the person
            )
        bars = (
            stack.enter_context(
                _one_bar_then_another(("check (bytes)", size), ("import (bytes)", size))
            )
            if not no_check
            else (transfer.no_progress, stack.enter_context(progress("import (bytes)", size)))
        )
        lines = stack.enter_context(
            transfer.import_input(file, check=not no_check, checking=bars[0])
        )
        if transfer.nothing_in(lines):
            made = "" if store is not None else "; no store was made"
            named = "standard input" if source == "-" else source
            _imported(ImportReport(0, 0, 0, 0), as_json, f"{named} holds no events{made}")
            return
        if store is None:
            store = context.store(create=True)
        report = transfer.import_events(store, lines, progress=bars[1], check=False)
    _imported(report, as_json)


def _imported(report: ImportReport, as_json: bool, nothing: str = "") -> None:
    """What an import did; `nothing` says why it had nothing to do, if it had not."""
    if as_json:
        emit_json(report)
    elif nothing:
        console().print(f"nothing to import: {nothing}")
    else:
        console().print(
            f"imported {report.events} events: {report.written} written, "
            f"{report.skipped} already in the store"
        )


@contextmanager
def _one_bar_then_another(
    first: tuple[str, int | None], then: tuple[str, int | None]
) -> Iterator[tuple[Callable[[int], None], Callable[[int], None]]]:
    """Two progress bars, one after the other (a terminal shows one at a time): the first
    from the start, the second in its place once it is first told something."""
    with ExitStack() as shown:
        told = shown.enter_context(progress(*first))
        second: list[Callable[[int], None]] = []

        def tell_second(done: int) -> None:
            if not second:
                shown.close()  # the first bar goes
                second.append(shown.enter_context(progress(*then)))
            second[0](done)

        yield told, tell_second


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
        # The document names the checkpoints checked after what they are: projections'.
        document = dataclasses.asdict(found)
        document["projections"] = document.pop("checkpoints")
        emit_json(document)
    else:
        out = console()
        projections = (
            counted(found.checkpoints, "projection checkpoint")
            if found.checkpoints is not None
            else "projections not checked (no --app)"
        )
        retained = (
            f" (retention removed events at or below {found.low_water_mark})"
            if found.low_water_mark
            else ""
        )
        summary = (
            f"{counted(found.events, 'event')} in {counted(found.streams, 'stream')} up to "
            f"position {found.high_water_mark}{retained}, "
            f"{counted(found.snapshots, 'snapshot')}, {projections}"
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
