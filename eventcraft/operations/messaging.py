"""Operating messaging: where each relay stands (publishing, or paused by an outage), and
the inboxes' error store, whose messages are looked at, resent (the running inbox stores
them again with its mapping) or discarded.

Only the store is needed, not the App: relays and inboxes keep what they say in the
store's database, and an inbox that is running picks up a resend by itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

import sqlalchemy as sa

from eventcraft.eventstore import EventStore
from eventcraft.messaging import FailedMessage, relay_state
from eventcraft.messaging import failed as error_store
from eventcraft.projections import Database, checkpoint

from .errors import NotFound


@dataclass(frozen=True)
class Failed:
    """A message an inbox could not store, as the shells show it."""

    inbox: str
    message_id: str
    subject: str
    """The routing key, subject or HTTP path it came with."""
    body: str
    """The body as text (bytes that are not UTF-8 shown as replacement characters)."""
    headers: dict[str, str]
    error: str
    """The last exception, as `Type: message`."""
    attempts: int
    failed_at: datetime
    resend: bool
    """A resend was asked for; the running inbox has not done it yet."""
    traceback: str


@dataclass(frozen=True)
class RelayView:
    """A relay as the shells show it: its checkpoint against the log, and its state."""

    name: str
    broker: str
    state: str
    """"running", "paused" (its broker is unavailable) or "stopped", as it last said."""
    position: int
    """Every selected event up to here is confirmed by the broker."""
    head: int
    lag_events: int
    paused_since: datetime | None
    last_error: str | None
    outages: int
    owner: str | None
    """The process holding its lease, if the lease is current."""
    updated_at: datetime


def relays(store: EventStore) -> list[RelayView]:
    """Every relay that ever ran against this store, by name."""
    head = store.high_water_mark()
    now = datetime.now(UTC).timestamp()
    with _database(store) as database, database.reading() as connection:
        states = relay_state.listed(connection)
        rows = checkpoint.read_many(connection, [s.name for s in states]) if states else {}
    shown = []
    for state in states:
        row = rows.get(state.name)
        position = row.position if row is not None else 0
        current = row is not None and (row.lease_until or 0.0) > now
        shown.append(
            RelayView(
                name=state.name,
                broker=state.broker,
                state=state.state,
                position=position,
                head=head,
                lag_events=max(head - position, 0),
                paused_since=_moment(state.paused_since),
                last_error=state.last_error,
                outages=state.outages,
                owner=row.owner if row is not None and current else None,
                updated_at=datetime.fromtimestamp(state.updated_at, UTC),
            )
        )
    return shown


def _moment(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


def failed(store: EventStore, inbox: str | None = None) -> list[Failed]:
    """The messages waiting in the error store (of one inbox, or all), oldest first."""
    with _database(store) as database, database.reading() as connection:
        if not _exists(connection):
            return []
        return [_shown(m) for m in error_store.listed(connection, inbox)]


def failed_message(store: EventStore, inbox: str, message_id: str) -> Failed:
    with _database(store) as database, database.reading() as connection:
        found = error_store.find(connection, inbox, message_id) if _exists(connection) else None
    if found is None:
        raise NotFound(f"inbox {inbox!r} has no failed message with id {message_id!r}")
    return _shown(found)


def resend(store: EventStore, inbox: str, message_id: str) -> Failed:
    """Ask the running inbox to store the message again; what it looks like now."""
    with _database(store) as database, database.transaction() as connection:
        # Re-checked in the transaction that marks it: it may have been resent meanwhile.
        if not _exists(connection) or not error_store.mark_resend(connection, inbox, message_id):
            raise NotFound(f"inbox {inbox!r} has no failed message with id {message_id!r}")
        found = error_store.find(connection, inbox, message_id)
    assert found is not None
    return _shown(found)


def discard(store: EventStore, inbox: str, message_id: str) -> None:
    """Forget the message: it is never stored."""
    with _database(store) as database, database.transaction() as connection:
        if not _exists(connection) or not error_store.remove(connection, inbox, message_id):
            raise NotFound(f"inbox {inbox!r} has no failed message with id {message_id!r}")


@contextmanager
def _database(store: EventStore) -> Iterator[Database]:
    database = Database.of(None, store)
    try:
        yield database
    finally:
        database.close()


def _exists(connection: sa.Connection) -> bool:
    # A store no inbox ever used has no error store: nothing failed, nothing to create.
    return sa.inspect(connection).has_table(error_store.FAILED)


def _shown(message: FailedMessage) -> Failed:
    return Failed(
        inbox=message.inbox,
        message_id=message.message_id,
        subject=message.subject,
        body=message.body.decode(errors="replace"),
        headers=message.headers,
        error=message.error,
        attempts=message.attempts,
        failed_at=datetime.fromtimestamp(message.failed_at, UTC),
        resend=message.resend,
        traceback=message.traceback,
    )
