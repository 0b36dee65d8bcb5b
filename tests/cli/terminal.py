"""Running `eventcraft` with its output on a terminal: a pseudo-terminal of a given width,
read as the command writes to it."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
import threading

WAIT = 120.0
"""Longest a command may take here: a generous bound, never what a test asserts."""

_STYLES = re.compile(r"\x1b\[[0-9;]*m")


def on_terminal(arguments: list[str], *, columns: int, program: list[str] | None = None) -> str:
    """What `eventcraft ARGUMENTS` (or `program` with them) showed on a terminal `columns`
    wide, without its styles; exit 0 asserted."""
    reader, writer = pty.openpty()
    shown = bytearray()

    def drain() -> None:
        try:
            while chunk := os.read(reader, 65536):
                shown.extend(chunk)
        except OSError:  # the terminal's other end closed
            pass

    draining = threading.Thread(target=drain, daemon=True)
    draining.start()
    try:
        environment = {**os.environ, "COLUMNS": str(columns), "LINES": "40", "TERM": "xterm"}
        environment.pop("NO_COLOR", None)
        subprocess.run(
            [*(program or [sys.executable, "-m", "eventcraft"]), *arguments],
            stdout=writer,
            env=environment,
            check=True,
            timeout=WAIT,
        )
    finally:
        os.close(writer)
        draining.join(WAIT)
        os.close(reader)
    return _STYLES.sub("", shown.decode().replace("\r\n", "\n"))


def columns_of(shown: str) -> list[list[str]]:
    """A terminal table's rows, each value put back together from the lines it was folded
    onto: the columns are where the rule under the header has its dashes, and a row starts
    at a line with something in the first column."""
    lines = shown.splitlines()
    rule = next(n for n, line in enumerate(lines) if line.startswith("─"))
    spans = [match.span() for match in re.finditer("─+", lines[rule])]
    rows: list[list[str]] = []
    for line in lines[rule + 1 :]:
        values = [line[start:end].strip() for start, end in spans]
        if values[0] or not rows:
            rows.append(values)
        else:
            rows[-1] = [before + more for before, more in zip(rows[-1], values, strict=True)]
    return rows
