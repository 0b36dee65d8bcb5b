"""`eventcraft console`: serve the web console for the store and the App, on loopback
unless told otherwise, read-only unless `--allow-actions`."""

from __future__ import annotations

import ipaddress
import socket

import click

from ..operations.errors import InputError, Problems
from .shell import shell

LOOPBACK_NAMES = ("localhost", "ip6-localhost")


@click.command(
    epilog="\b\nExamples:\n  eventcraft --app myservice.app:app console\n"
    "  eventcraft --store sqlite:///events.db console --port 9000\n"
    "  EVENTCRAFT_CONSOLE_TOKEN=... eventcraft --app myservice.app:app console "
    "--host 0.0.0.0 --allow-actions"
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
    "--metrics",
    is_flag=True,
    help="Serve eventcraft's metrics at /metrics for Prometheus (extra 'prometheus').",
)
def console(host: str, port: int, allow_actions: bool, token: str | None, metrics: bool) -> None:
    """Serve the web console: the log, streams, events, projections and sagas."""
    try:
        import uvicorn

        from ..console import create_app
    except ImportError as error:
        raise InputError(
            f"the console needs its extra: pip install 'eventcraft[console]' ({error})"
        ) from error
    found = shell()
    store = found.store()
    from ..app import App

    app = found.app() if found.app_reference else App()
    if not loopback(host):
        click.echo(
            f"warning: serving on {host}, which other machines can reach"
            + ("" if token else "; without --token anyone who reaches it can read the log"),
            err=True,
        )
    _check_free(host, port)
    served = create_app(store, app, allow_actions=allow_actions, token=token, metrics=metrics)
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


def loopback(host: str) -> bool:
    """Whether only this machine can reach `host`."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
