"""Stores holding a known history, on every backend, and a way to run the command."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

import psycopg
import pytest
from eventcraft.eventstore import EventStore, NewEvent

from eventcraft.cli.main import main

from ..conftest import PG_URL

# (stream, type, data, correlation id, index of the causing event in this list or None)
HISTORY: list[tuple[str, str, dict[str, object], str, int | None]] = [
    ("order-1", "OrderPlaced", {"customer": "ann", "cents": 1200}, "checkout-1", None),
    ("payment-1", "PaymentTaken", {"cents": 1200}, "checkout-1", 0),
    ("order-1", "OrderPaid", {"cents": 1200}, "checkout-1", 1),
    ("order-2", "OrderPlaced", {"customer": "bob", "cents": 300}, "checkout-2", None),
    ("shipment-1", "ParcelSent", {"order": "order-1"}, "checkout-1", 2),
    ("order-2", "OrderCancelled", {"reason": "changed mind"}, "checkout-2", 3),
]

TAGS: list[tuple[str, ...]] = [
    ("customer:ann", "order:1"),
    ("customer:ann", "order:1"),
    ("customer:ann", "order:1"),
    ("customer:bob", "order:2"),
    (),
    ("customer:bob", "order:2"),
]
"""HISTORY's events' tags, sorted: events of both orders carry their customer's."""


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str


Run = Callable[..., Outcome]


def schema_exists(schema: str) -> bool:
    """Whether the test server holds `schema`: what a command must not have created."""
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname = %s", (schema,)
        ).fetchone()
    return bool(row and row[0])


def fill(store: EventStore) -> list[uuid.UUID]:
    """Append HISTORY, one event an append; the events' ids in order."""
    ids = [uuid.UUID(int=n + 1) for n in range(len(HISTORY))]
    for n, (stream, type_, data, correlation, cause) in enumerate(HISTORY):
        causation = str(ids[cause]) if cause is not None else correlation
        metadata = {"correlation_id": correlation, "causation_id": causation}
        store.append(stream, [NewEvent(type_, data, metadata, id=ids[n], tags=TAGS[n])])
    return ids


@pytest.fixture
def known(store: EventStore) -> EventStore:
    """An open store on each backend in turn (memory too), holding HISTORY: what the
    operations are tested on."""
    fill(store)
    return store


@pytest.fixture
def known_url(shared_store_url: str) -> str:
    """A store URL on SQLite and PostgreSQL, holding HISTORY: what the commands are run
    against (a memory:// store lives only as long as the process that opened it)."""
    with EventStore.open(shared_store_url) as store:
        fill(store)
    return shared_store_url


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Run:
    """Run `eventcraft ARGS...` in this process; its exit code and output."""

    def run_command(*arguments: str) -> Outcome:
        code = main(list(arguments))
        captured = capsys.readouterr()
        return Outcome(code, captured.out, captured.err)

    return run_command
