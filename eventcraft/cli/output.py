"""How commands print: rich tables and trees for people, JSON for programs, progress bars
only on a terminal."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar

import click
import orjson
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from eventcraft.eventstore import RecordedEvent

from ..operations.documents import event_document, event_line

F = TypeVar("F", bound=Callable[..., Any])

json_option: Callable[[F], F] = click.option(
    "--json", "as_json", is_flag=True, help="Print JSON for programs instead of a table."
)


def console() -> Console:
    # soft_wrap: a pipe gets whole lines; a terminal folds what it cannot show.
    # No markup or emoji codes: what commands print holds ids, names and bodies people
    # chose, which print as they are ('m-[/x]', ':smile:'); styles are given as Text.
    return Console(soft_wrap=not sys.stdout.isatty(), highlight=False, markup=False, emoji=False)


def emit_json(document: Any) -> None:
    """One JSON document on stdout."""
    sys.stdout.buffer.write(orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n")
    sys.stdout.flush()


def emit_events(events: Iterable[RecordedEvent]) -> int:
    """NDJSON, one event a line, flushed as they come (a follower's reader sees each)."""
    count = 0
    for event in events:
        sys.stdout.buffer.write(event_line(event))
        sys.stdout.flush()
        count += 1
    return count


def events_table(events: Iterable[RecordedEvent], *, title: str | None = None) -> Table:
    table = Table(title=title, show_lines=False)
    for column in ("position", "stream", "version", "type", "recorded at (UTC)", "correlation"):
        table.add_column(column, justify="right" if column in ("position", "version") else "left")
    for event in events:
        table.add_row(
            str(event.position),
            Text(event.stream_id),
            str(event.version),
            type_and_tags(event),
            when(event.recorded_at),
            Text(str(event.metadata.get("correlation_id", ""))),
        )
    return table


def type_and_tags(event: RecordedEvent) -> Text:
    """The event's type, then its tags (dimmed) where it has some: `Enrolled [course:c1]`."""
    shown = Text(event.type)
    if event.tags:
        shown.append(f" [{', '.join(event.tags)}]", style="dim")
    return shown


def table(columns: Sequence[str], rows: Iterable[Sequence[Any]], title: str | None = None) -> Table:
    shown = Table(title=title)
    for column in columns:
        shown.add_column(column)
    for row in rows:
        # Text, not markup: a value holding [brackets] (an error's repr) shows as it is.
        shown.add_row(*(Text("" if value is None else str(value)) for value in row))
    return shown


def event_json(event: RecordedEvent) -> Syntax:
    text = orjson.dumps(event_document(event), option=orjson.OPT_INDENT_2).decode()
    return Syntax(text, "json", theme="ansi_dark", background_color="default")


def when(moment: datetime | None) -> str:
    """A time as the tables show it: UTC to the millisecond, no zone (the headers say UTC)."""
    if moment is None:
        return ""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


@contextmanager
def progress(description: str, total: int | None) -> Iterator[Callable[[int], None]]:
    """A bar on stderr when it is a terminal; nothing at all when piped."""
    if not sys.stderr.isatty():
        yield lambda done: None
        return
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    with bar:
        task = bar.add_task(description, total=total)
        yield lambda done: bar.update(task, completed=done)


def counted(number: int, noun: str) -> str:
    """`1 snapshot`, `2 snapshots`: a count and its noun, plural unless one."""
    return f"{number} {noun}{'' if number == 1 else 's'}"
