"""Tables as commands print them, a chunk of rows at a time: tab-separated with every
value whole where the output is not a terminal, aligned columns where it is.

A table is never held whole: a log of millions prints its first rows at once, in
the memory of one chunk. So a terminal's column widths are those of the rows seen
so far (they only grow), and a value wider than its column, or than the terminal,
folds onto the column's next line rather than being cut: an id shows whole.
Piped, a row is one line of values separated by tabs, with a tab, a newline or a
backslash in a value written `\\t`, `\\n`, `\\\\` (as PostgreSQL's COPY text does),
so that `cut -f2` or `awk -F'\\t'` always finds its column.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TextIO

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

Cell = str | int | Text | None
"""A value of a row: `Text` where part of it is styled (a terminal shows the style)."""

CHUNK = 1000
"""Most rows a table holds at once."""

CHUNK_WAIT = 0.1
"""Longest rows wait, in s, for more to print with them: a filter that finds few shows
each as it is found."""

GAP = "  "
"""Between two columns on a terminal."""

_ESCAPED = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
_SPECIAL = re.compile(r"[\\\t\n\r]")
_HEADER = Style(bold=True)
_RULE = Style(dim=True)
_TITLE = Style(italic=True)


@dataclass(frozen=True)
class Column:
    """A table's column: its name, and whether its values (numbers) align right."""

    name: str
    right: bool = False


class Rows:
    """A table: columns, and rows read only as it is printed (`print_table` prints it a
    chunk at a time; `Console.print` takes it too, whole, for a short table)."""

    def __init__(
        self,
        columns: Sequence[str | Column],
        rows: Iterable[Sequence[Cell]],
        *,
        title: str | None = None,
    ) -> None:
        self.columns = [c if isinstance(c, Column) else Column(c) for c in columns]
        self.rows = rows
        self.title = title

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if not is_terminal(console):
            yield Segment(tab_separated(self.columns, []))
            for chunk in chunks(self.rows):
                yield Segment(tab_separated(None, chunk))
            return
        layout = _Layout(self.columns, self.title)
        for chunk in chunks(self.rows):
            yield from layout.segments(chunk, console, options.max_width)
        yield from layout.segments([], console, options.max_width)  # a table without rows


def print_table(shown: Rows, out: Console) -> None:
    """Print `shown` a chunk at a time as its rows are read: each chunk reaches the output
    (a pipe, a terminal) before the next is read."""
    if not is_terminal(out):
        with ended_by_a_closed_pipe():
            out.file.write(tab_separated(shown.columns, []))
            for chunk in chunks(shown.rows):
                out.file.write(tab_separated(None, chunk))
                out.file.flush()
            out.file.flush()
        return
    layout = _Layout(shown.columns, shown.title)
    for chunk in chunks(shown.rows):
        out.print(_Chunk(layout, chunk), soft_wrap=True, end="")
    if not layout.started:
        out.print(_Chunk(layout, []), soft_wrap=True, end="")


def is_terminal(console: Console) -> bool:
    """Whether the console writes to a terminal (a person reads it), not a pipe or a file."""
    return console.is_terminal


def chunks(rows: Iterable[Sequence[Cell]]) -> Iterator[list[Sequence[Cell]]]:
    """`rows` in lists of at most CHUNK, each handed on once full or once its rows have
    waited CHUNK_WAIT."""
    chunk: list[Sequence[Cell]] = []
    started = time.monotonic()
    for row in rows:
        chunk.append(row)
        if len(chunk) >= CHUNK or time.monotonic() - started >= CHUNK_WAIT:
            yield chunk
            chunk = []
            started = time.monotonic()
    if chunk:
        yield chunk


def tab_separated(columns: Sequence[Column] | None, rows: Iterable[Sequence[Cell]]) -> str:
    """The lines of `rows` (after a header line of the columns' names, if given), values
    separated by tabs, whole."""
    lines = [] if columns is None else ["\t".join(_escaped(c.name) for c in columns)]
    lines.extend("\t".join([_escaped(plain(value)) for value in row]) for row in rows)
    return "".join(f"{line}\n" for line in lines)


def plain(value: Cell) -> str:
    """A value as text, without its style; nothing for None."""
    if value is None:
        return ""
    if isinstance(value, Text):
        return value.plain
    return str(value)


@contextmanager
def ended_by_a_closed_pipe() -> Iterator[None]:
    """A write to a pipe its reader closed (`head` has its lines) ends the command
    quietly, exit 1, as Python's documentation advises: what is left in the output's
    buffer goes to /dev/null rather than fail again, with a traceback, at exit."""
    try:
        yield
    except BrokenPipeError:
        _to_devnull(sys.stdout)
        raise SystemExit(1) from None


def _to_devnull(stream: TextIO) -> None:
    try:
        descriptor = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return  # not a file of the system's (a test's capture): nothing is left to fail
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, descriptor)
    os.close(devnull)


class _Layout:
    """The columns' widths on a terminal, grown by each chunk to the widest value seen,
    then fitted to the terminal: the widest columns give up room first."""

    def __init__(self, columns: Sequence[Column], title: str | None) -> None:
        self.columns = columns
        self.title = title
        self.natural = [cell_len(c.name) for c in columns]
        self.started = False

    def segments(
        self, rows: Sequence[Sequence[Cell]], console: Console, room: int
    ) -> Iterator[Segment]:
        shown: list[list[Cell]] = []
        lengths: list[list[int]] = []
        for row in rows:
            values: list[Cell] = []
            widths_here: list[int] = []
            for value in row:
                text = value if type(value) is str else plain(value)
                if _SPECIAL.search(text) is not None:
                    value = text = text.translate(_ESCAPED)  # its style goes: never a tag's
                elif not isinstance(value, Text):
                    value = text
                values.append(value)
                widths_here.append(width_of(text))
            shown.append(values)
            lengths.append(widths_here)
        self.natural = [max(column) for column in zip(self.natural, *lengths, strict=True)]
        widths = fitted(self.natural, room)
        if not self.started:
            self.started = True
            if self.title:
                yield Segment(f"{self.title}\n", _TITLE)
            header = [Text(c.name, style=_HEADER) for c in self.columns]
            yield from self._row(header, widths, console)
            yield Segment(GAP.join("─" * width for width in widths), _RULE)
            yield Segment.line()
        right = [c.right for c in self.columns]
        for row, length in zip(shown, lengths, strict=True):
            if all(map(int.__le__, length, widths)) and not any(isinstance(v, Text) for v in row):
                # Most rows: plain values that fit, one line.
                line = GAP.join(
                    " " * (w - n) + str(v) if r else str(v) + " " * (w - n)
                    for v, n, w, r in zip(row, length, widths, right, strict=True)
                )
                yield Segment(f"{line.rstrip(' ')}\n")
            else:
                yield from self._row(row, widths, console)

    def _row(
        self, row: Sequence[Cell], widths: Sequence[int], console: Console
    ) -> Iterator[Segment]:
        folded = [_folded(value, width, console) for value, width in zip(row, widths, strict=True)]
        for line in range(max(len(pieces) for pieces in folded)):
            # Up to the last column with something on this line: no trailing blanks.
            last = max(n for n, pieces in enumerate(folded) if line < len(pieces))
            # Unstyled text goes out as one segment, a styled piece as its own.
            parts: list[str] = []
            for n, pieces in enumerate(folded[: last + 1]):
                piece = pieces[line] if line < len(pieces) else ""
                text = plain(piece)
                padding = " " * (widths[n] - cell_len(text))
                right = self.columns[n].right
                if right:
                    parts.append(padding)
                if isinstance(piece, Text) and (piece.spans or piece.style):
                    yield Segment("".join(parts))
                    parts = []
                    yield from _styled(piece, console)
                else:
                    parts.append(text)
                if n < last:
                    parts.append(GAP if right else padding + GAP)
            parts.append("\n")
            yield Segment("".join(parts))


class _Chunk:
    """One chunk of a table's rows, for `Console.print`."""

    def __init__(self, layout: _Layout, rows: Sequence[Sequence[Cell]]) -> None:
        self.layout = layout
        self.rows = rows

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from self.layout.segments(self.rows, console, options.max_width)


def width_of(text: str) -> int:
    """The cells `text` takes on a terminal."""
    # Most values are printable ASCII, a cell a character, measured at once; rich's
    # measure looks each character up (a third of a row's time).
    return len(text) if text.isascii() and text.isprintable() else cell_len(text)


def fitted(widths: Sequence[int], room: int) -> list[int]:
    """`widths` made to fit `room` columns of a terminal with GAP between them: the widest
    are cut to one width, as large as leaves them room; a column keeps at least 1."""
    room = max(room - len(GAP) * (len(widths) - 1), len(widths))
    if sum(widths) <= room:
        return list(widths)
    low, high = 1, max(widths)
    while low < high:  # the largest cap under which the columns fit
        cap = (low + high + 1) // 2
        if sum(min(width, cap) for width in widths) <= room:
            low = cap
        else:
            high = cap - 1
    shown = [min(width, low) for width in widths]
    spare = room - sum(shown)
    for n, width in enumerate(widths):  # what the cap left over, to the cut columns
        if spare and width > low:
            shown[n] += 1
            spare -= 1
    return shown


def _folded(value: Cell, width: int, console: Console) -> list[Cell]:
    """`value` in lines of at most `width` cells, broken between words where it can be
    and within a word (an id) where it cannot: the lines it takes in its column."""
    if cell_len(plain(value)) <= width:
        return [value]
    text = value if isinstance(value, Text) else Text(plain(value))
    return list(text.wrap(console, width, overflow="fold"))


def _styled(piece: Text, console: Console) -> Iterable[Segment]:
    # Text.render leaves out the Text's own style where it has no spans: applied here.
    rendered = piece.render(console, end="")
    if not piece.style:
        return rendered
    return Segment.apply_style(rendered, console.get_style(piece.style))


def _escaped(text: str) -> str:
    return text if _SPECIAL.search(text) is None else text.translate(_ESCAPED)
