"""`eventcraft-spark`, the command before `eventcraft spark`, kept as an alias: today's
arguments, rewritten to `eventcraft --store URL spark ...` and run by the same checks,
with a one-line note on stderr."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from .main import main


def alias_main(argv: Sequence[str] | None = None) -> int:
    """`eventcraft-spark`: today's arguments, run as `eventcraft --store URL spark ...`.

    `eventcraft-spark [--master URL] export|replay ... --store URL` takes the
    store after the command and the master on either side; both are moved to
    where `eventcraft` takes them, and everything else is passed on as it is.
    """
    arguments = list(sys.argv[1:] if argv is None else argv)
    translated = _translated(arguments)
    if not {"-h", "--help"} & set(arguments):
        click.echo(
            "note: eventcraft-spark is now `eventcraft [--store URL] spark export|replay ...`",
            err=True,
        )
    return main(translated)


def alias_run() -> None:
    sys.exit(alias_main())


def _translated(arguments: list[str]) -> list[str]:
    globals_: list[str] = []
    before: list[str] = []
    command: list[str] = []
    items = iter(arguments)
    for item in items:
        if not command and item in ("export", "replay"):
            command = [item]
        elif item == "--store":
            globals_ += [item, next(items, "")]
        elif item.startswith("--store=") or item == "--debug":
            globals_.append(item)
        elif not command and item == "--master":
            before += [item, next(items, "")]
        elif command:
            command.append(item)
        else:
            before.append(item)
    if not command:
        return [*globals_, "spark", *before]
    return [*globals_, "spark", command[0], *before, *command[1:]]
