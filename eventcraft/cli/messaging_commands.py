"""`eventcraft messaging ...`: the relays' state, and the inboxes' error store listed,
shown, resent, discarded (its content erased, its record listed apart with `failed --discarded`)."""

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
                    f"{r.lag_events}+" if r.lag_capped else r.lag_events,
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
    "  eventcraft messaging failed orders-in --json\n"
    "  eventcraft messaging failed --discarded"
)
@click.argument("inbox", required=False)
@click.option(
    "--discarded", is_flag=True, help="List the messages discarded instead, with when and why."
)
@json_option
def failed(inbox: str | None, discarded: bool, as_json: bool) -> None:
    """List the messages waiting in the error store (of one inbox, or all)."""
    found = operations.failed(shell().store(), inbox, discarded=discarded)
    if as_json:
        emit_json(found)
        return
    if discarded:
        console().print(
            table(
                (
                    "inbox",
                    "message id",
                    "subject",
                    "tries",
                    "discarded at (UTC)",
                    "reason",
                    "error",
                ),
                (
                    (
                        f.inbox,
                        f.message_id,
                        f.subject,
                        f.attempts,
                        when(f.discarded_at),
                        f.discard_reason or "",
                        f.error,
                    )
                    for f in found
                ),
            )
        )
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
    """Show one failed message, waiting or discarded: its body, headers, error and traceback."""
    found = operations.failed_message(shell().store(), inbox, message_id)
    if as_json:
        emit_json(found)
        return
    out = console()
    out.print(f"inbox {found.inbox}, message {found.message_id}, subject {found.subject!r}")
    out.print(f"tried {found.attempts} times, last at {when(found.failed_at)}: {found.error}")
    if found.discarded_at is not None:
        said = f": {found.discard_reason}" if found.discard_reason else ""
        out.print(f"discarded at {when(found.discarded_at)}{said}")
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
    A discarded message is not resent.
    """
    store = shell().store()
    found = operations.to_settle(store, inbox, message_id)
    confirmed(
        f"Resend message {message_id!r} to inbox {inbox!r}? It failed with {found.error}", yes
    )
    operations.resend(store, inbox, message_id)
    console().print(f"resend asked: inbox {inbox!r} stores {message_id!r} when it next looks")


@messaging.command(
    epilog="\b\nExamples:\n"
    "  eventcraft messaging discard orders-in msg-42 --reason 'a test order' --yes"
)
@click.argument("inbox")
@click.argument("message_id")
@click.option("--reason", help="Why it is discarded, kept with it.")
@yes_option
def discard(inbox: str, message_id: str, reason: str | None, yes: bool) -> None:
    """Settle a failed message without storing it.

    Its body, headers and error message are erased; its record stays, marked discarded
    with when and the reason given, and listed by `messaging failed --discarded`; it is
    not resent or discarded again. If its
    sender delivers it again and it fails again, it waits in the error store again.
    """
    store = shell().store()
    found = operations.to_settle(store, inbox, message_id)
    confirmed(
        f"Discard message {message_id!r} of inbox {inbox!r}? It failed with {found.error}", yes
    )
    operations.discard(store, inbox, message_id, reason)
    console().print(
        f"discarded: message {message_id!r} of inbox {inbox!r}, its content erased "
        "(messaging failed --discarded lists its record)"
    )
