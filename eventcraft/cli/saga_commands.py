"""`eventcraft sagas ...`: the App's saga instances, one instance's timeline, and the
actions on parked or running ones (retry, compensate, resolve, cancel)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import click
import orjson
from rich.text import Text

from ..operations import sagas as operations
from ..operations.sagas import SagaSummary
from .output import console, emit_json, json_option, table, when
from .shell import confirmed, opened, yes_option
from .tables import Column, Rows

APP = "eventcraft --app svc.app:app"


@click.group(
    epilog=f"\b\nExamples:\n  {APP} sagas list --status parked\n  {APP} sagas show checkout 42"
)
def sagas() -> None:
    """See and operate the App's sagas: instances, timelines, parked ones."""


@sagas.command(
    "list",
    epilog=f"\b\nExamples:\n  {APP} sagas list\n  {APP} sagas list --name checkout "
    "--status running --json",
)
@click.option("--status", type=click.Choice(operations.STATUSES), help="Only instances in it.")
@click.option("--name", help="Only instances of this saga.")
@json_option
def list_(status: str | None, name: str | None, as_json: bool) -> None:
    """List saga instances: status, the step they are at, when they started and last moved."""
    found = operations.instances(*opened(), status=status, name=name)
    if as_json:
        emit_json(found)
    else:
        console().print(_summaries(found))


@sagas.command(
    epilog=f"\b\nExamples:\n  {APP} sagas show checkout 42\n  {APP} sagas show checkout 42 --json"
)
@click.argument("name")
@click.argument("saga_id", metavar="ID")
@json_option
def show(name: str, saga_id: str, as_json: bool) -> None:
    """Show an instance and its transitions as a timeline."""
    found = operations.saga(*opened(), name, saga_id)
    if as_json:
        emit_json(found)
        return
    summary = found.saga
    out = console()
    out.print(
        Text.assemble(
            (summary.stream_id, "bold"),
            f"  {summary.status}  correlation {found.correlation_id}  data {_json(found.data)}",
        )
    )
    why = summary.parked_because or summary.failure
    if why:
        out.print(Text(f"{'parked' if summary.parked_because else 'failed'}: {why}"))
    if found.bug is not None:
        out.print(Text(f"{found.bug.error_type}: {found.bug.message}", "bold"))
        out.print(Text(found.bug.traceback.rstrip()))
    # The idempotency key shows whole, as every value does (folded on a narrow terminal):
    # it is what an operator looks up in the service's logs.
    timeline = table(
        (
            Column("#", right=True),
            "time (UTC)",
            "transition",
            "step",
            Column("try", right=True),
            "idempotency key",
            "error / result / note",
        ),
        (
            (
                t.version,
                when(t.recorded_at),
                t.type,
                t.step or "",
                "" if t.attempt is None else str(t.attempt),
                t.idempotency_key or "",
                t.error or (_json(t.result) if t.type == "StepSucceeded" else t.note) or "",
            )
            for t in found.transitions
        ),
    )
    out.print(timeline)


@sagas.command(epilog=f"\b\nExamples:\n  {APP} sagas parked --json")
@json_option
def parked(as_json: bool) -> None:
    """List the parked instances of the App's sagas: a step raised what it does not declare
    (a bug), or a compensation kept failing."""
    found = operations.parked(*opened())
    if as_json:
        emit_json(found)
    else:
        console().print(_summaries(found))


@sagas.command(epilog=f"\b\nExamples:\n  {APP} sagas retry checkout 42 --yes")
@click.argument("name")
@click.argument("saga_id", metavar="ID")
@yes_option
def retry(name: str, saga_id: str, yes: bool) -> None:
    """Run a parked instance again, in this process, from where it stopped: the step it
    parked on (after a fix), or its compensations.

    Exits 1 if one fails again (the instance is parked again).
    """
    store, app = opened()
    found = operations.expect(store, app, name, saga_id, "parked")
    confirmed(
        f"Run {found.stream_id} again from where it stopped, here? "
        f"It parked on {found.step}: {found.parked_because}",
        yes,
    )
    done = operations.retry(store, app, name, saga_id)
    console().print(f"{done.stream_id} retried: {done.status}")


@sagas.command(
    epilog=f"\b\nExamples:\n  {APP} sagas compensate checkout 42 --reason 'order withdrawn' --yes"
)
@click.argument("name")
@click.argument("saga_id", metavar="ID")
@click.option("--reason", required=True, help="Why it is undone (kept in its stream).")
@yes_option
def compensate(name: str, saga_id: str, reason: str, yes: bool) -> None:
    """Compensate a parked instance, in this process: undo what its steps did.

    Exits 1 if a compensation fails (the instance is parked again).
    """
    store, app = opened()
    found = operations.expect(store, app, name, saga_id, "parked")
    confirmed(
        f"Undo what {found.stream_id} did, here? It parked on {found.step}: {found.parked_because}",
        yes,
    )
    done = operations.compensate(store, app, name, saga_id, reason)
    console().print(f"{done.stream_id} compensated: {done.status}")


@sagas.command(
    epilog=f"\b\nExamples:\n  {APP} sagas resolve checkout 42 --note 'refunded by hand, ticket 981'"
)
@click.argument("name")
@click.argument("saga_id", metavar="ID")
@click.option("--note", required=True, help="How it was settled (kept in its stream).")
@yes_option
def resolve(name: str, saga_id: str, note: str, yes: bool) -> None:
    """Mark a parked instance settled by hand, with a note; nothing runs for it again."""
    store, app = opened()
    found = operations.expect(store, app, name, saga_id, "parked")
    confirmed(f"Mark {found.stream_id} resolved, with the note {note!r}?", yes)
    done = operations.resolve(store, app, name, saga_id, note)
    console().print(f"{done.stream_id} {done.status}: {note}")


@sagas.command(epilog=f"\b\nExamples:\n  {APP} sagas cancel checkout 42 --reason 'order withdrawn'")
@click.argument("name")
@click.argument("saga_id", metavar="ID")
@click.option("--reason", default="by an operator", show_default=True, help="Kept in its stream.")
@yes_option
def cancel(name: str, saga_id: str, reason: str, yes: bool) -> None:
    """Stop a running instance; the service's orchestrators compensate what it did."""
    store, app = opened()
    found = operations.expect(store, app, name, saga_id, "running")
    confirmed(f"Cancel {found.stream_id} (at step {found.step}) and compensate it?", yes)
    done = operations.cancel(store, app, name, saga_id, reason)
    console().print(f"{done.stream_id} cancelled: {done.status}")


def _summaries(found: Iterable[SagaSummary]) -> Rows:
    return table(
        ("saga", "id", "status", "step", "transitions", "started (UTC)", "last move (UTC)", "why"),
        (
            (
                s.name,
                s.saga_id,
                s.status,
                s.step,
                s.version,
                when(s.started_at),
                when(s.updated_at),
                s.parked_because or s.failure,
            )
            for s in found
        ),
    )


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()
