"""`eventcraft delete-stream STREAM [--tombstone]`: hide a stream from reads, or close it for
ever, after showing what will be done."""

from __future__ import annotations

import click

from ..operations import deletion as operations
from .output import console, emit_json, json_option
from .shell import confirmed, shell, yes_option


@click.command(
    "delete-stream",
    epilog="\b\nExamples:\n  eventcraft --store postgresql://db/app delete-stream order-42\n"
    "  eventcraft delete-stream order-42 --tombstone --yes --json",
)
@click.argument("stream_id", metavar="STREAM")
@click.option(
    "--tombstone", is_flag=True, help="Close the stream for ever: no append is taken again."
)
@click.option(
    "--expected-version",
    type=click.IntRange(min=0),
    metavar="N",
    help="Delete only if the stream is at version N [default: the version shown].",
)
@yes_option
@json_option
def delete_stream(
    stream_id: str, tombstone: bool, expected_version: int | None, yes: bool, as_json: bool
) -> None:
    """Delete STREAM: its reads show nothing (an append brings it back), or, with
    --tombstone, it can never be written again. The log keeps its events until retention
    removes them, archived first."""
    store = shell().store()
    planned = operations.plan(store, stream_id, tombstone=tombstone)
    confirmed(operations.describe(planned), yes)
    # Re-checked: a stream written since it was shown is not deleted.
    expected = planned.version if expected_version is None else expected_version
    done = operations.delete(store, stream_id, expected_version=expected, tombstone=tombstone)
    if as_json:
        emit_json(done)
        return
    what = "tombstoned" if done.tombstone else "deleted"
    if done.version == 0:  # only a tombstone takes a stream never written
        console().print(f"{what} {stream_id!r}, which had no events: no append is taken again")
        return
    console().print(
        f"{what} {stream_id!r} at version {done.version}: reads show it as absent; "
        "a retention run removes its events from the store"
    )
