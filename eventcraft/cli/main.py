"""`eventcraft`: see, export, verify and operate an event store from a terminal.

The command tree is click's: explicit, with the error output in our hands (one
line on stderr, exit 2 for what the user typed, exit 1 for what the command
found), where Typer would draw its own panels around errors. Each command
parses, calls one function of `eventcraft.operations`, and prints.

Exit codes: 0 done; 1 the command ran and found problems, or the store could
not be reached; 2 a usage or input error. `--debug` shows the traceback.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import click

from eventcraft import __version__
from eventcraft.eventstore import (
    EventStoreError,
    InvalidEvent,
    InvalidTenant,
    StoreUnavailable,
    UnsupportedStoreURL,
    check_tenant,
)

from ..operations.errors import InputError, OperationError, Problems
from .console_commands import console
from .deletion_commands import delete_stream
from .log_commands import LOG_COMMANDS
from .messaging_commands import messaging
from .personal_commands import forget
from .projection_commands import projections
from .retention_commands import retention
from .saga_commands import sagas
from .schema_commands import schema
from .shell import Shell
from .spark_commands import spark
from .tenant_commands import tenant
from .transfer_commands import TRANSFER_COMMANDS

EPILOG = """\b
Examples:
  eventcraft --store sqlite:///var/app/events.db stats
  eventcraft --store postgresql://db/app log --category order --follow
  eventcraft --app myservice.app:app projections status
  eventcraft --app myservice.app:app console
  eventcraft --store postgresql://db/app forget customer-42
  eventcraft --store 'sqlite:///tenants/{tenant}.db' --tenant acme log
  eventcraft --store 'postgresql://db/app?schema=shop_{tenant}' tenant list
"""


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, epilog=EPILOG)
@click.option(
    "--store",
    "store_url",
    envvar="EVENTCRAFT_STORE",
    metavar="URL",
    help="The store: sqlite:///path.db, postgresql://user@host/db, memory://, or a "
    "template naming each tenant's place with {tenant} (see --tenant) "
    "[env EVENTCRAFT_STORE; default: the App's].",
)
@click.option(
    "--tenant",
    envvar="EVENTCRAFT_TENANT",
    metavar="TENANT",
    help="The tenant whose store every command works on, in a store URL naming each "
    "tenant's place with {tenant} (sqlite:///tenants/{tenant}.db, "
    "postgresql://host/db?schema=shop_{tenant}) [env EVENTCRAFT_TENANT].",
)
@click.option(
    "--app",
    "app_reference",
    envvar="EVENTCRAFT_APP",
    metavar="MODULE:NAME",
    help="The service's eventcraft.App, for commands about projections and sagas "
    "[env EVENTCRAFT_APP].",
)
@click.option("--debug", is_flag=True, help="Show the traceback of an error.")
@click.version_option(__version__, "--version", prog_name="eventcraft")
@click.pass_context
def cli(
    context: click.Context,
    store_url: str | None,
    tenant: str | None,
    app_reference: str | None,
    debug: bool,
) -> None:
    """See, export, verify and operate an eventcraft event store, or one tenant's (--tenant)."""
    if tenant is not None:
        try:
            check_tenant(tenant)
        except InvalidTenant as error:
            raise InputError(f"--tenant: {error}") from None
    shell = Shell(store_url=store_url, app_reference=app_reference, debug=debug, tenant=tenant)
    context.obj = shell
    context.call_on_close(shell.close)


for command in (*LOG_COMMANDS, *TRANSFER_COMMANDS):
    cli.add_command(command)
cli.add_command(projections)
cli.add_command(sagas)
cli.add_command(schema)
cli.add_command(messaging)
cli.add_command(spark)
cli.add_command(console)
cli.add_command(forget)
cli.add_command(retention)
cli.add_command(delete_stream)
cli.add_command(tenant)


def main(argv: Sequence[str] | None = None) -> int:
    """The console script: runs a command and turns what it raised into an exit code."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    try:
        with _library_logs_unless(debug=_debug_asked(arguments)):
            result = cli.main(args=arguments, prog_name="eventcraft", standalone_mode=False)
    except click.exceptions.Exit as done:
        return done.exit_code
    except click.exceptions.NoArgsIsHelpError as bare:
        bare.show()  # a group named alone: its help, on stderr, exit 2, as click does
        return bare.exit_code
    except KeyboardInterrupt:
        return 130
    except Exception as error:
        if _debug_asked(arguments) and not isinstance(error, click.ClickException | click.Abort):
            raise
        message, code = _explained(error)
        lines = message.strip().splitlines()
        click.echo(f"error: {lines[0] if lines else type(error).__name__}", err=True)
        return code
    return result if isinstance(result, int) else 0


@contextmanager
def _library_logs_unless(*, debug: bool) -> Iterator[None]:
    """Without `--debug`, the library's log records are not printed: a command says what
    went wrong in its one `error:` line, and Python would print records of WARNING and
    above to stderr beside it when no handler is configured (its "last resort"). A
    handler that drops them stands in while the command runs; one the App configured
    itself still gets them."""
    if debug:
        yield
        return
    dropping = logging.NullHandler()
    root = logging.getLogger()
    root.addHandler(dropping)
    try:
        yield
    finally:
        root.removeHandler(dropping)


def _debug_asked(arguments: Sequence[str]) -> bool:
    """Whether `--debug` is among the options before the command's name: an argument
    spelled so further on (`show -- --debug`, a stream's id) asks for nothing."""
    taking_value = False
    for argument in arguments:
        if taking_value:
            taking_value = False
        elif argument == "--debug":
            return True
        elif argument in ("--store", "--tenant", "--app"):
            taking_value = True
        elif not argument.startswith("-"):
            return False  # the command's name: what follows is the command's
    return False


def _explained(error: Exception) -> tuple[str, int]:
    """The one line an error is shown as, and the exit code it ends the command with."""
    if isinstance(error, click.UsageError):
        hint = f" (see: {error.ctx.command_path} --help)" if error.ctx else ""
        return f"{error.format_message()}{hint}", 2
    if isinstance(error, click.ClickException):
        return error.format_message(), error.exit_code
    if isinstance(error, click.Abort):
        return "aborted: nothing was done", 1
    if isinstance(error, InputError | UnsupportedStoreURL | InvalidEvent):
        return str(error), 2
    if isinstance(error, StoreUnavailable):
        return f"the store cannot be reached: {error}", 1
    if isinstance(error, Problems | OperationError | EventStoreError):
        return str(error), 1
    return f"{type(error).__name__}: {error} (run with --debug for the traceback)", 1


def run() -> None:
    sys.exit(main())
