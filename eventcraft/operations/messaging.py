"""Operating the inboxes' error store: the messages that could not be stored, looked at,
resent (the running inbox stores them again with its mapping) or discarded.

Only the store is needed, not the App: the messages wait in the store's database,
and an inbox that is running picks up a resend by itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

import sqlalchemy as sa

from eventcraft.eventstore import EventStore
from eventcraft.messaging import FailedMessage
from eventcraft.messaging import failed as error_store
from eventcraft.projections import Database

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
