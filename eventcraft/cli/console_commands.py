"""`eventcraft console`: serve the web console for the store and the App, on loopback
unless told otherwise, read-only unless `--allow-actions`."""

from __future__ import annotations

import socket

import click

from eventcraft.eventstore import EventStore, redacted

from ..operations import tenants
from ..operations.errors import InputError, Problems
from .shell import shell

ANSWERED_LOOPBACK = ("127.0.0.1", "localhost", "[::1]")
"""The names of this machine a console always answers for: a page of another origin cannot
send them as its Host, so they cannot carry a DNS rebinding."""

WILDCARDS = ("0.0.0.0", "::", "")
"""Bind addresses that mean every interface: no one opens the console by them."""


@click.command(
    epilog="\b\nExamples:\n  eventcraft --app myservice.app:app console\n"
    "  eventcraft --store sqlite:///events.db console --port 9000\n"
    "  EVENTCRAFT_CONSOLE_TOKEN=... eventcraft --app myservice.app:app console "
    "--host 0.0.0.0 --allow-actions\n"
    "  eventcraft --store 'sqlite:///tenants/{tenant}.db' console --tenants acme,globex"
)
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to bind.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8470, show_default=True, help="The port."
)
@click.option(
    "--allow-actions",
    is_flag=True,
    help="Offer the actions (retry, discard, rebuild, resolve, cancel); read-only otherwise.",
)
@click.option(
    "--token",
    envvar="EVENTCRAFT_CONSOLE_TOKEN",
    metavar="TOKEN",
    help="Every request must carry it (open /?token=TOKEN once) [env EVENTCRAFT_CONSOLE_TOKEN].",
)
@click.option(
    "--insecure-no-token",
    is_flag=True,
    help="Allow actions beyond loopback without --token: anyone who reaches the console "
    "can act. Refused otherwise.",
)
@click.option(
    "--allow-host",
    "allowed_hosts",
    multiple=True,
    envvar="EVENTCRAFT_CONSOLE_HOSTS",
    metavar="NAME[:PORT]",
    help="Also answer requests for this host name, as opened through a proxy or from "
    "another machine (repeatable); others get 400 [env EVENTCRAFT_CONSOLE_HOSTS, "
    "space-separated].",
)
@click.option(
    "--tenants",
    "shown_tenants",
    metavar="TENANT,...",
    help="With a store URL naming each tenant's place with {tenant}: show only these "
    "tenants (comma-separated); a page of any other is 404 [default: every tenant].",
)
@click.option(
    "--metrics",
    is_flag=True,
    help="Serve eventcraft's metrics at /metrics for Prometheus (extra 'prometheus').",
)
def console(
    host: str,
    port: int,
    allow_actions: bool,
    token: str | None,
    insecure_no_token: bool,
    allowed_hosts: tuple[str, ...],
    shown_tenants: str | None,
    metrics: bool,
) -> None:
    """Serve the web console: the log, streams, events, projections and sagas.

    It answers only requests for the loopback names and the --host it binds, on its
    port, and the names given with --allow-host. Actions beyond loopback need --token
    (or --insecure-no-token).

    On a store URL naming each tenant's place with {tenant}, it opens on a list of the
    tenants, and each tenant's pages (under /t/TENANT/) show that tenant's store alone;
    --tenants limits the tenants it shows, and --tenant serves one tenant's console."""
    try:
        import uvicorn

        from ..console import create_app
        from ..console.security import loopback
    except ImportError as error:
        raise InputError(
            f"the console needs its extra: pip install 'eventcraft[console]' ({error})"
        ) from error
    reached = [name for name in (host, *allowed_hosts) if not loopback(_name_of(name))]
    if allow_actions and not token and reached:
        if not insecure_no_token:
            # A direct client sends a loopback Host and reads the CSRF token off the page:
            # only the token tells an operator from anyone else who reaches the address.
            raise InputError(
                f"--allow-actions on {reached[0]}, which other machines can reach, needs "
                "--token (or EVENTCRAFT_CONSOLE_TOKEN); --insecure-no-token lets anyone act"
            )
        click.echo(
            "warning: anyone who reaches it can act (--allow-actions with --insecure-no-token)",
            err=True,
        )
    found = shell()
    chosen = None
    if shown_tenants is not None:
        if found.tenant is not None:
            raise InputError(
                f"--tenants chooses the tenants a console over tenants shows, and --tenant "
                f"{found.tenant} serves one tenant's: give one of them"
            )
        chosen = tenants.checked_tenants(
            [name.strip() for name in shown_tenants.split(",") if name.strip()]
        )
    if found.tenant is None and tenants.is_template(found.given_url()):
        store: EventStore | str = found.template()
    elif chosen is not None:
        raise InputError(
            f"--tenants needs a store URL naming each tenant's place with {{tenant}}, and "
            f"{redacted(found.given_url())!r} is one store"
        )
    else:
        store = found.store()
    from ..app import App

    app = found.app() if found.app_reference else App()
    if not loopback(host):
        click.echo(
            f"warning: serving on {host}, which other machines can reach"
            + ("" if token else "; without --token anyone who reaches it can read the log"),
            err=True,
        )
        if host in WILDCARDS and not allowed_hosts:
            click.echo(
                "warning: it answers only requests for this machine's loopback names: "
                "add --allow-host NAME for the name others open it by",
                err=True,
            )
    _check_free(host, port)
    served = create_app(
        store,
        app,
        allow_actions=allow_actions,
        token=token,
        metrics=metrics,
        hosts=answered(host, port, allowed_hosts),
        insecure_no_token=insecure_no_token,
        shown_tenants=chosen,
    )
    mode = "actions allowed" if allow_actions else "read-only"
    shown = f"[{host}]" if ":" in host else host
    click.echo(f"eventcraft console on http://{shown}:{port}/ ({mode}); Ctrl+C stops it", err=True)
    uvicorn.run(served, host=host, port=port, log_level="warning", access_log=False)


def _check_free(host: str, port: int) -> None:
    """Fail in one line if the address cannot be listened on (uvicorn would log and exit)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        with socket.socket(infos[0][0], socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(infos[0][4])
    except OSError as error:
        raise Problems(f"cannot listen on {host}:{port}: {error.strerror or error}") from error


def answered(host: str, port: int, allowed: tuple[str, ...]) -> list[str]:
    """The Host names the console answers for: the loopback names and the address it binds
    (on its port, any if the system picks it), and the names given as they were given."""
    bound = [] if host in WILDCARDS else [f"[{host.strip('[]')}]" if ":" in host else host]
    return [
        *(name if port == 0 else f"{name}:{port}" for name in (*ANSWERED_LOOPBACK, *bound)),
        *allowed,
    ]


def _name_of(host: str) -> str:
    """The name of `--host ADDRESS` or `--allow-host NAME[:PORT]`, without the port."""
    if host.startswith("[") or host.count(":") != 1:
        return host.partition("]")[0].strip("[")  # an IPv6 address, bracketed or not
    return host.partition(":")[0]
