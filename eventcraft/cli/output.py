"""How commands print: tables (`tables.py`: aligned on a terminal, tab-separated when
piped) and trees for people, JSON for programs, progress bars only on a terminal."""

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
from rich.text import Text

from eventcraft.eventstore import RecordedEvent

from ..operations.documents import event_document, event_line
from .tables import Cell, Column, Rows, ended_by_a_closed_pipe

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
    with ended_by_a_closed_pipe():
        sys.stdout.buffer.write(orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n")
        sys.stdout.flush()


def emit_events(events: Iterable[RecordedEvent]) -> int:
    """NDJSON, one event a line, flushed as they come (a follower's reader sees each)."""
    count = 0
    with ended_by_a_closed_pipe():
        for event in events:
            sys.stdout.buffer.write(event_line(event))
            sys.stdout.flush()
            count += 1
    return count


EVENT_COLUMNS = (
    Column("position", right=True),
    Column("stream"),
    Column("version", right=True),
    Column("type"),
    Column("recorded at (UTC)"),
    Column("correlation"),
)


def events_table(events: Iterable[RecordedEvent], *, title: str | None = None) -> Rows:
    """The events as a table, read as it is printed (`print_table`)."""
    return Rows(EVENT_COLUMNS, (_event_row(event) for event in events), title=title)


def _event_row(event: RecordedEvent) -> tuple[Cell, ...]:
    return (
        event.position,
        event.stream_id,
        event.version,
        type_and_tags(event) if event.tags else event.type,  # a Text only to style tags
        when(event.recorded_at),
        str(event.metadata.get("correlation_id", "")),
    )


def type_and_tags(event: RecordedEvent) -> Text:
    """The event's type, then its tags (dimmed) where it has some: `Enrolled [course:c1]`."""
    shown = Text(event.type)
    if event.tags:
        shown.append(f" [{', '.join(event.tags)}]", style="dim")
    return shown


def table(
    columns: Sequence[str | Column], rows: Iterable[Sequence[Any]], title: str | None = None
) -> Rows:
    """A table of `rows` (values shown as `str` shows them; None as nothing), for
    `console().print`, or `print_table` for a long one."""
    # Values print as they are: a value holding [brackets] (an error's repr) is not markup.
    return Rows(columns, ([_cell(value) for value in row] for row in rows), title=title)


def _cell(value: Any) -> Cell:
    return value if value is None or isinstance(value, str | int | Text) else str(value)


def event_json(event: RecordedEvent) -> Syntax:
    text = orjson.dumps(event_document(event), option=orjson.OPT_INDENT_2).decode()
    return Syntax(text, "json", theme="ansi_dark", background_color="default")


def when(moment: datetime | None) -> str:
    """A time as the tables show it: UTC to the millisecond, no zone (the headers say UTC)."""
    if moment is None:
        return ""
    # isoformat, not strftime: a fifth of the time, for every row of a long log.
    return moment.astimezone(UTC).isoformat(" ", "milliseconds")[:23]


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
