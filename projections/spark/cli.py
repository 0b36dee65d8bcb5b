"""`python -m eventcraft.projections.spark`: replay and export, as before `eventcraft spark`.

    python -m eventcraft.projections.spark export --store URL --archive /data/log
    python -m eventcraft.projections.spark replay examples.read_models:account_balances \
        --store postgresql://db/app --archive /data/log --master spark://head:7077

Deprecated: use `eventcraft --store URL spark export | replay ...`, which
checks every argument, the store, the archive and the fold before a JVM
starts. The `eventcraft-spark` console script is now an alias of that
command (`eventcraft.cli.spark_alias.alias_main`); this module cannot
delegate to it, as the library never imports the `eventcraft` shell. It
prints a one-line note saying so, and refuses a local archive that does
not exist rather than replay it as an empty log.

The fold is named as `module:attribute`, the module importable here and on
the executors.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from ..definition import Definition
from ..errors import DefinitionError, ProjectionError
from .archive import Archive
from .replay import replay
from .session import LOCAL_SETTINGS, spark_session


def main(argv: Sequence[str] | None = None) -> int:
    arguments = _parser().parse_args(argv)
    print(_DEPRECATED, file=sys.stderr)
    archive = getattr(arguments, "archive", None)
    if arguments.command == "replay" and archive and _missing(archive):
        print(f"error: the archive {archive!r} does not exist: nothing to replay", file=sys.stderr)
        return 2
    local = arguments.master.startswith("local")
    spark = spark_session(arguments.master, settings=LOCAL_SETTINGS if local else None)
    try:
        if arguments.command == "export":
            report = Archive(arguments.archive).export(spark, arguments.store)
            print(
                f"exported {report.events} events (positions {report.after + 1}-{report.upto}) "
                f"to {report.path}"
            )
            return 0
        fold = load_definition(arguments.definition)
        source = Archive(arguments.archive) if arguments.archive else None
        done = replay(
            fold,
            arguments.store,
            spark=spark,
            source=source,
            database=arguments.database,
            partitions=arguments.partitions,
            progress=not arguments.quiet,
        )
        print(
            f"replayed {done.name}: {done.events} events up to position {done.replayed_to} "
            f"into {done.rows} rows, generation {done.generation}, checkpoint {done.position} "
            f"({done.caught_up} caught up in the swap), {done.seconds:.1f} s"
        )
        return 0
    except ProjectionError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


_DEPRECATED = (
    "note: python -m eventcraft.projections.spark is deprecated: "
    "use `eventcraft --store URL spark export|replay ...`"
)


def _missing(archive: str) -> bool:
    """A local archive (no `scheme://`, as `Archive` reads it) that is not there."""
    return "://" not in archive and not archive.startswith("file:") and not os.path.isdir(archive)


def load_definition(reference: str) -> Definition:
    """The definition named `module:attribute`, importable from the current folder too.

    A console script's path does not hold the folder it was started in, as
    `python -m` does; the user's module is usually there (as for uvicorn or celery).
    """
    module_name, _, attribute = reference.partition(":")
    if not module_name or not attribute:
        raise DefinitionError(f"name the fold as module:attribute, not {reference!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        found = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise DefinitionError(f"cannot load {reference!r}: {error}") from error
    if not isinstance(found, Definition):
        raise DefinitionError(f"{reference!r} is {found!r}, not a projection definition")
    return found


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m eventcraft.projections.spark",
        description="Replay the event log as Spark jobs.",
    )
    master = argparse.ArgumentParser(add_help=False)
    # Taken before the command or after it: `--master URL replay ...`, `replay ... --master URL`.
    master.add_argument("--master", default=argparse.SUPPRESS, help="Spark master URL (local[*])")
    parser.add_argument("--master", default="local[*]", help="Spark master URL (local[*])")
    commands = parser.add_subparsers(dest="command", required=True)
    export = commands.add_parser(
        "export", parents=[master], help="extend the Parquet archive of the log"
    )
    export.add_argument("--store", required=True, help="store URL (sqlite:/// or postgresql://)")
    export.add_argument("--archive", required=True, help="archive directory or Hadoop URL")
    run = commands.add_parser(
        "replay", parents=[master], help="rebuild a fold's read model and swap it in"
    )
    run.add_argument("definition", help="the Fold, as module:attribute")
    run.add_argument("--store", required=True, help="store URL (sqlite:/// or postgresql://)")
    run.add_argument("--archive", help="read the log from this archive, not the store")
    run.add_argument("--database", help="read-model database URL (default: the store's)")
    run.add_argument("--partitions", type=int, help="tasks that fold and write (cores)")
    run.add_argument("--quiet", action="store_true", help="no progress bars")
    return parser
