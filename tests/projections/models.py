"""Read models the projection tests share, importable by worker processes."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any, Literal

import sqlalchemy as sa
from eventcraft.eventstore import EventStore, NewEvent, RecordedEvent
from eventcraft.projections import (
    Definition,
    ErrorPolicy,
    Fold,
    Projection,
    ReadModel,
    State,
    Subscription,
)

TYPES = ["Opened", "Deposited", "Withdrawn"]

metadata = sa.MetaData()

balances_table = sa.Table(
    "balances",
    metadata,
    sa.Column("account_id", sa.Text, primary_key=True),
    sa.Column("balance", sa.BigInteger, nullable=False),
    sa.Column("movements", sa.Integer, nullable=False),
)

applied_table = sa.Table(
    "applied",
    metadata,
    # No unique key on purpose: an event applied twice must show, not fail.
    sa.Column("position", sa.BigInteger, nullable=False),
    sa.Column("stream_id", sa.Text, nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Index("applied_position", "position"),
)


def _initial(key: Any) -> State:
    return {"account_id": key, "balance": 0, "movements": 0}


def _evolve(state: State, event: RecordedEvent) -> State | None:
    if event.type == "Deposited":
        return {
            **state,
            "balance": state["balance"] + event.data["amount"],
            "movements": state["movements"] + 1,
        }
    if event.type == "Withdrawn":
        return {
            **state,
            "balance": state["balance"] - event.data["amount"],
            "movements": state["movements"] + 1,
        }
    return state


balances = Fold(
    "balances",
    table=balances_table,
    types=TYPES,
    key=lambda event: event.stream_id,
    initial=_initial,
    apply=_evolve,
)

TRAP: dict[str, Any] = {"position": None, "marker": None}
"""Set in a worker: the audit handler announces `position` in `marker`, then hangs.

Only the process that creates `marker` hangs: of two racing workers, the first there."""

audit = Projection("audit", tables=[applied_table], on_error=ErrorPolicy(attempts=1))


@audit.on(*TYPES)
def _record(read_model: ReadModel, event: RecordedEvent) -> None:
    read_model.execute(
        sa.insert(read_model[applied_table]).values(
            position=event.position, stream_id=event.stream_id, pid=os.getpid()
        )
    )
    if TRAP["position"] == event.position and _first_at(Path(TRAP["marker"])):
        time.sleep(600)  # killed here, mid-batch, with rows written but not committed


def _first_at(marker: Path) -> bool:
    """Create `marker` holding our pid; False if another process created it first."""
    try:
        descriptor = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    with os.fdopen(descriptor, "w") as file:
        file.write(str(os.getpid()))
    return True


def append_history(store: EventStore, accounts: int, per_account: int) -> int:
    """Open `accounts` accounts and move money; returns the last position."""
    last = 0
    for n in range(per_account):
        for account in range(accounts):
            event = (
                NewEvent("Opened", {})
                if n == 0
                else NewEvent("Deposited" if n % 3 else "Withdrawn", {"amount": n * 10 + account})
            )
            last = store.append(f"account-{account}", [event]).positions[-1]
    return last


def rows(connection: sa.Connection, table: sa.Table) -> list[tuple[Any, ...]]:
    """The read model's rows through its view, in a stable order."""
    return sorted(tuple(row) for row in connection.execute(sa.select(table)))


notes_table = sa.Table(
    "notes",
    metadata,
    sa.Column("position", sa.BigInteger, primary_key=True),
    sa.Column("text", sa.Text, nullable=False),
)


def flaky(then: Literal["stop", "skip"], fail_on: set[str]) -> Projection:
    """Writes a note per event, and raises on the texts in `fail_on`."""
    projection = Projection(
        f"notes-{then}",
        tables=[notes_table],
        on_error=ErrorPolicy(attempts=3, backoff=0, then=then),
    )

    @projection.on("Note")
    def note(read_model: ReadModel, event: RecordedEvent) -> None:
        # Written before failing: a failed event must leave no half of it behind.
        read_model.execute(
            sa.insert(read_model[notes_table]).values(
                position=event.position, text=event.data["text"]
            )
        )
        if event.data["text"] in fail_on:
            raise ValueError(f"cannot take {event.data['text']!r}")

    return projection


def notes(store: EventStore, *texts: str) -> list[int]:
    return [store.append("notebook-1", [NewEvent("Note", {"text": t})]).positions[0] for t in texts]


def failing_once(kind: str, sent: list[int], failed: threading.Event) -> Definition:
    """Notes as a projection (`notes_table`) or a subscription (each position sent to
    `sent`); the first try of 'blip' raises and sets `failed`, and the next would work."""
    policy = ErrorPolicy(attempts=5, backoff=60, then="skip")

    def blip(event: RecordedEvent) -> None:
        if event.data["text"] == "blip" and not failed.is_set():
            failed.set()
            raise ConnectionError("transient blip")

    def send(event: RecordedEvent) -> None:
        blip(event)
        sent.append(event.position)

    if kind == "subscription":
        return Subscription("notes", send, on_error=policy)
    projection = Projection("notes", tables=[notes_table], on_error=policy)

    @projection.on("Note")
    def note(read_model: ReadModel, event: RecordedEvent) -> None:
        blip(event)
        read_model.execute(
            sa.insert(read_model[notes_table]).values(
                position=event.position, text=event.data["text"]
            )
        )

    return projection
