"""`eventcraft messaging ...`: the relays' state, and the inboxes' error store listed,
shown, resent, discarded."""

from __future__ import annotations

import click

from ..operations import messaging as operations
from .output import console, emit_json, json_option, table, when
from .shell import confirmed, shell, yes_option


@click.group(
    epilog="\b\nExamples:\n  eventcraft --store postgresql://db/app messaging failed\n"
    "  eventcraft --store postgresql://db/app messaging resend orders-in msg-42 --yes"
)
def messaging() -> None:
    """Relays and inboxes: where each relay stands; failed messages listed, resent."""


@messaging.command(epilog="\b\nExamples:\n  eventcraft messaging relays --json")
@json_option
def relays(as_json: bool) -> None:
    """Show each relay's broker, state (running, paused by an outage, stopped) and lag."""
    found = operations.relays(shell().store())
    if as_json:
        emit_json(found)
        return
    console().print(
        table(
            ("relay", "state", "checkpoint", "head", "lag", "since", "broker", "last error"),
            (
                (
                    r.name,
                    r.state,
                    r.position,
                    r.head,
                    r.lag_events,
                    when(r.paused_since or r.updated_at),
                    r.broker,
                    r.last_error or "",
                )
                for r in found
            ),
        )
    )


@messaging.command(
    epilog="\b\nExamples:\n  eventcraft messaging failed\n"
    "  eventcraft messaging failed orders-in --json"
)
@click.argument("inbox", required=False)
@json_option
def failed(inbox: str | None, as_json: bool) -> None:
    """List the messages waiting in the error store (of one inbox, or all)."""
    found = operations.failed(shell().store(), inbox)
    if as_json:
        emit_json(found)
        return
    console().print(
        table(
            ("inbox", "message id", "subject", "tries", "failed at (UTC)", "resend", "error"),
            (
                (
                    f.inbox,
                    f.message_id,
                    f.subject,
                    f.attempts,
                    when(f.failed_at),
                    "asked" if f.resend else "",
                    f.error,
                )
                for f in found
            ),
        )
    )


@messaging.command(epilog="\b\nExamples:\n  eventcraft messaging show orders-in msg-42")
@click.argument("inbox")
@click.argument("message_id")
@json_option
def show(inbox: str, message_id: str, as_json: bool) -> None:
    """Show one failed message: its body, headers, error and traceback."""
    found = operations.failed_message(shell().store(), inbox, message_id)
    if as_json:
        emit_json(found)
        return
    out = console()
    out.print(f"inbox {found.inbox}, message {found.message_id}, subject {found.subject!r}")
    out.print(f"tried {found.attempts} times, last at {when(found.failed_at)}: {found.error}")
    for name, value in sorted(found.headers.items()):
        out.print(f"  {name}: {value}")
    out.print(found.body)
    out.print(found.traceback)


@messaging.command(epilog="\b\nExamples:\n  eventcraft messaging resend orders-in msg-42 --yes")
@click.argument("inbox")
@click.argument("message_id")
@yes_option
def resend(inbox: str, message_id: str, yes: bool) -> None:
    """Have the running inbox store the message again, with its mapping.

    Once stored it leaves the error store; if it fails again it stays, one try more.
    """
    store = shell().store()
    found = operations.failed_message(store, inbox, message_id)
    confirmed(
        f"Resend message {message_id!r} to inbox {inbox!r}? It failed with {found.error}", yes
    )
    operations.resend(store, inbox, message_id)
    console().print(f"resend asked: inbox {inbox!r} stores {message_id!r} when it next looks")


@messaging.command(epilog="\b\nExamples:\n  eventcraft messaging discard orders-in msg-42 --yes")
@click.argument("inbox")
@click.argument("message_id")
@yes_option
def discard(inbox: str, message_id: str, yes: bool) -> None:
    """Forget a failed message: it is never stored."""
    store = shell().store()
    found = operations.failed_message(store, inbox, message_id)
    confirmed(
        f"Discard message {message_id!r} of inbox {inbox!r}? It failed with {found.error}", yes
    )
    operations.discard(store, inbox, message_id)
    console().print(f"discarded: message {message_id!r} of inbox {inbox!r}")
