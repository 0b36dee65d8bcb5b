"""`eventcraft spark export | replay`: the log as Spark jobs, every argument checked first.

Starting a JVM takes 8 to 25 s, so each command first calls a `check_*`
operation (master URL, store opened, local archive, database URL, fold
imported) and only then `run_*`, the one place pyspark is imported: help
and every argument error work without the spark extra.

`eventcraft-spark`, the command before this one, stays as an alias
(`spark_alias.py`).
"""

from __future__ import annotations

import sys

import click

from ..operations import spark as operations
from .output import emit_json, json_option
from .shell import shell

_ARCHIVE_HELP = (
    "Local folder or Hadoop URL (hdfs:, s3a:, ...). A local folder is checked here; "
    "a Hadoop URL can only be checked by Spark, so it is passed through."
)
_MASTER = click.option(
    "--master",
    default="local[*]",
    show_default=True,
    metavar="URL",
    help=f"Spark master: {operations.MASTER_FORMS}.",
)


@click.group(
    epilog="\b\nExamples:\n"
    "  eventcraft --store postgresql://db/app spark export --archive /data/log\n"
    "  eventcraft --store postgresql://db/app spark replay \\\n"
    "      examples.read_models:account_balances --archive /data/log \\\n"
    "      --master spark://head:7077"
)
def spark() -> None:
    """Replay the log as Spark jobs: archive it as Parquet, rebuild a fold's read model.

    Arguments, the store, a local archive and the fold are checked before the
    JVM starts. Needs the spark extra (pip install 'eventcraft[spark]') and Java 17.
    """


@spark.command(
    "export",
    epilog="\b\nExamples:\n"
    "  eventcraft --store sqlite:///events.db spark export --archive ./archive\n"
    "  eventcraft --store postgresql://db/app spark export --archive hdfs://nn/log",
)
@click.option("--archive", required=True, metavar="PATH|URL", help=_ARCHIVE_HELP)
@click.option(
    "--parsed-data/--no-parsed-data",
    default=True,
    show_default=True,
    help="Also store each event's data parsed (a VARIANT column), which reducer folds "
    "read instead of parsing JSON; without it the segment is smaller.",
)
@_MASTER
@json_option
def export_command(archive: str, parsed_data: bool, master: str, as_json: bool) -> None:
    """Append the store's events since the last export to the Parquet archive.

    A local archive folder is created if missing; its parent folder must exist.
    """
    plan = operations.check_export(shell().url(), archive, master=master, parsed=parsed_data)
    report = operations.run_export(plan)
    if as_json:
        emit_json(report)
        return
    click.echo(
        f"exported {report.events} events (positions {report.after + 1}-{report.upto}) "
        f"to {report.path}, read through {report.read_path}"
    )


@spark.command(
    "replay",
    epilog="\b\nExamples:\n"
    "  eventcraft --store sqlite:///events.db spark replay myservice.folds:balances\n"
    "  eventcraft --store postgresql://db/app spark replay myservice.folds:balances \\\n"
    "      --archive /data/log --database postgresql://db/reads --partitions 16\n"
    "  eventcraft --app myservice.app:app spark replay account-balances",
)
@click.argument("fold", metavar="MODULE:NAME")
@click.option(
    "--archive",
    metavar="PATH|URL",
    help="Read the log from this archive, not the store. " + _ARCHIVE_HELP,
)
@click.option(
    "--database", metavar="URL", help="Read-model database (default: the App's, or the store's)."
)
@click.option(
    "--partitions", type=click.IntRange(min=1), help="Tasks that fold and write (default: cores)."
)
@click.option("--quiet", is_flag=True, help="No progress bars.")
@_MASTER
@json_option
def replay_command(
    fold: str,
    archive: str | None,
    database: str | None,
    partitions: int | None,
    quiet: bool,
    master: str,
    as_json: bool,
) -> None:
    """Rebuild a Fold's read model from the whole log in Spark, then swap it in.

    FOLD is module:attribute, importable from this folder and on the executors,
    or with --app the name of one of the App's projections.
    """
    context = shell()
    app = context.app() if context.app_reference else None
    plan = operations.check_replay(
        fold,
        context.url(),
        archive=archive,
        database=database if database is not None else (app.database if app else None),
        partitions=partitions,
        master=master,
        progress=not quiet and not as_json and sys.stdout.isatty(),
        app=app,
    )
    done = operations.run_replay(plan)
    if as_json:
        emit_json(done)
        return
    click.echo(
        f"replayed {done.name}: {done.events} events up to position {done.replayed_to} "
        f"into {done.rows} rows, generation {done.generation}, checkpoint {done.position} "
        f"({done.caught_up} caught up in the swap), log read through {done.read_path}, "
        f"{done.seconds:.1f} s"
    )
