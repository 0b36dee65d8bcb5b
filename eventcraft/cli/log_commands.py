"""Commands that read the log: streams, show, log, event, trace, stats."""

from __future__ import annotations

import dataclasses
import itertools
import threading
from datetime import UTC, datetime

import click
from rich.text import Text
from rich.tree import Tree

from ..operations import log as operations
from ..operations.errors import NotFound
from ..operations.log import LogFilter, TraceNode
from ..operations.missing_stream import missing_stream
from ..operations.numbers import MAX_AFTER, MAX_INT
from .output import (
    console,
    emit_events,
    emit_json,
    event_json,
    events_table,
    json_option,
    table,
    type_and_tags,
    when,
)
from .shell import shell
from .tables import print_table

# Bounded by what the store holds, so that a number too large is refused naming the flag.
POSITIVE = click.IntRange(min=1, max=MAX_INT)
NOT_NEGATIVE = click.IntRange(min=0, max=MAX_AFTER)


class _Time(click.ParamType[datetime]):
    """An ISO time: without a zone it is UTC's; with one (`Z`, `+01:00`), converted to UTC."""

    name = "TIME"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> datetime:
        if isinstance(value, datetime):
            return value
        try:
            moment = datetime.fromisoformat(str(value))
        except ValueError:
            self.fail(
                f"{value!r} is not a time: write 2026-01-31, 2026-01-31T12:00 or "
                "2026-01-31T12:00:00Z (no zone: UTC)",
                param,
                ctx,
            )
        if moment.tzinfo is None:
            return moment.replace(tzinfo=UTC)
        return moment.astimezone(UTC)


TIME = _Time()


@click.command(epilog="\b\nExamples:\n  eventcraft streams --category order --limit 20")
@click.option("--category", help="Only streams of this category.")
@click.option("--prefix", default="", help="Only streams whose id starts with this.")
@click.option("--after", metavar="ID", help="Start after this stream id (keyset paging).")
@click.option("--limit", type=POSITIVE, default=50, show_default=True)
@json_option
def streams(
    category: str | None, prefix: str, after: str | None, limit: int, as_json: bool
) -> None:
    """List streams: id, version, first and last event time."""
    found = operations.stream_search(
        shell().store(), prefix=prefix, category=category, after=after, limit=limit
    )
    if as_json:
        emit_json(found)
        return
    console().print(
        table(
            ("stream", "version", "first event (UTC)", "last event (UTC)"),
            (
                (s.stream_id, s.version, when(s.first_recorded_at), when(s.last_recorded_at))
                for s in found
            ),
        )
    )


@click.command(
    epilog="\b\nExamples:\n  eventcraft show order-42\n  eventcraft show order-42 --from 3 --json"
)
@click.argument("stream")
@click.option("--from", "from_version", type=POSITIVE, help="First version to show.")
@click.option("--limit", type=POSITIVE, help="Most events to show.")
@json_option
def show(stream: str, from_version: int | None, limit: int | None, as_json: bool) -> None:
    """Show a stream's events, in version order."""
    store = shell().store()
    try:
        events = operations.stream_events(store, stream, from_version=from_version, limit=limit)
    except NotFound:
        raise missing_stream(store, stream) from None
    if as_json:
        emit_events(events)
    else:
        print_table(events_table(events, title=stream), console())


@click.command(
    epilog="\b\nExamples:\n  eventcraft log --after 1000 --limit 50\n"
    "  eventcraft log --category order --type OrderPlaced --follow --json\n"
    "  eventcraft log --tag course:c1 --tag student:s7"
)
@click.option("--after", type=NOT_NEGATIVE, default=0, help="Start after this position.")
@click.option("--limit", type=POSITIVE, default=None, help="Most events to show.")
@click.option("--category", "categories", multiple=True, help="Only this category (repeatable).")
@click.option("--type", "types", multiple=True, help="Only this event type (repeatable).")
@click.option(
    "--tag", "tags", multiple=True, help="Only events carrying this tag (repeatable: all of them)."
)
@click.option("--correlation", metavar="ID", help="Only events of this correlation id.")
@click.option("--since", type=TIME, help="Only events recorded from this time (ISO; no zone: UTC).")
@click.option(
    "--until",
    type=TIME,
    help="Only events recorded before this time (ISO; no zone: UTC); not with --follow.",
)
@click.option(
    "--follow",
    is_flag=True,
    help="Go on showing new events until interrupted, or until --limit events are shown "
    "(as tail -f; --until is refused: what comes next is never before a time already past).",
)
@json_option
def log(
    after: int,
    limit: int | None,
    categories: tuple[str, ...],
    types: tuple[str, ...],
    tags: tuple[str, ...],
    correlation: str | None,
    since: datetime | None,
    until: datetime | None,
    follow: bool,
    as_json: bool,
) -> None:
    """Read the global log in position order."""
    if follow and until is not None:
        raise click.UsageError("--until and --follow cannot be used together")
    store = shell().store()
    where = LogFilter(
        categories=categories,
        types=types,
        tags=tags,
        correlation_id=correlation,
        since=since,
        until=until,
    )
    if follow:
        stop = threading.Event()
        followed = operations.follow(store, after=after, where=where, stopped=stop.is_set)
        # Stops asking once `limit` are shown, rather than wait for one more.
        events = itertools.islice(followed, limit)
        try:
            if as_json:
                emit_events(events)
            else:
                out = console()
                for event in events:
                    line = Text(f"{event.position:>8}  {event.stream_id}  v{event.version}  ")
                    out.print(line + type_and_tags(event))
        except KeyboardInterrupt:
            stop.set()
        return
    found = operations.log_events(store, after=after, limit=limit, where=where)
    if as_json:
        emit_events(found)
    else:
        print_table(events_table(found), console())


@click.command(
    epilog="\b\nExamples:\n  eventcraft event 1042\n  eventcraft event 0b0e…-uuid --json"
)
@click.argument("position_or_id")
@json_option
def event(position_or_id: str, as_json: bool) -> None:
    """Show one event, whole: data and metadata pretty-printed."""
    found = operations.find_event(shell().store(), position_or_id)
    if as_json:
        emit_events([found])
    else:
        console().print(event_json(found))


@click.command(epilog="\b\nExamples:\n  eventcraft trace checkout-42")
@click.argument("correlation_id")
@json_option
def trace(correlation_id: str, as_json: bool) -> None:
    """Show every event of one correlation as a causation tree."""
    roots = operations.trace(shell().store(), correlation_id)
    if as_json:
        emit_json([_tree_document(node) for node in roots])
        return
    tree = Tree(Text(f"correlation {correlation_id}"))
    for node in roots:
        _grow(tree, node)
    console().print(tree)


@click.command(epilog="\b\nExamples:\n  eventcraft stats --json")
@json_option
def stats(as_json: bool) -> None:
    """Show the head, the high-water mark, and counts by category and type."""
    found = operations.stats(shell().store())
    if as_json:
        replica = None if found.replica is None else found.replica._asdict()
        emit_json({**dataclasses.asdict(found), "replica": replica})
        return
    out = console()
    out.print(
        table(
            ("head", "high-water mark", "events", "first event (UTC)", "last event (UTC)"),
            [
                (
                    found.head,
                    found.high_water_mark,
                    found.events,
                    when(found.first_recorded_at),
                    when(found.last_recorded_at),
                )
            ],
        )
    )
    if found.replica is not None:
        lag = found.replica
        state = "promoted" if lag.promoted else "replay paused" if lag.paused else "replaying"
        out.print(
            table(
                ("read replica", "high-water mark", "events behind", "WAL bytes behind"),
                [(state, lag.high_water_mark, lag.events, lag.bytes)],
            )
        )
    out.print(table(("category", "events"), found.by_category.items()))
    out.print(table(("type", "events"), found.by_type.items()))


def _grow(parent: Tree, node: TraceNode) -> None:
    event = node.event
    branch = parent.add(
        Text(
            f"@{event.position} {event.type}  {event.stream_id} v{event.version}  "
            f"{when(event.recorded_at)}"
        )
    )
    for child in node.caused:
        _grow(branch, child)


def _tree_document(node: TraceNode) -> dict[str, object]:
    from ..operations.documents import event_document

    return {
        "event": event_document(node.event),
        "caused": [_tree_document(child) for child in node.caused],
    }


LOG_COMMANDS = (streams, show, log, event, trace, stats)
