"""Operating messaging: where each relay stands (publishing, or paused by an outage), and
the inboxes' error store, whose messages are looked at, resent (the running inbox stores
them again with its mapping) or discarded (kept, marked discarded, listed apart).

Only the store is needed, not the App: relays and inboxes keep what they say in the
store's database, and an inbox that is running picks up a resend by itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

from eventcraft.eventstore import EventStore
from eventcraft.messaging import (
    FailedMessage,
    FailedMessageNotFound,
    InboxErrorStore,
    MessageDiscarded,
    RelayRecord,
    relay_records,
)
from eventcraft.projections import Database

from .errors import NotFound, Problems


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
    discarded_at: datetime | None
    """When an operator discarded it; None while it waits to be resent or discarded."""
    discard_reason: str | None
    """What the operator said when discarding it, if anything."""


def relays(store: EventStore) -> list[RelayRecord]:
    """Every relay that ever ran against this store, by name; its lag counted from the
    selection it records beside its state (`relay_records`), reading nothing else."""
    return relay_records(store)


def _moment(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


Cursor = tuple[str, float, str]
"""Where a page of the error store ends: the inbox, time and id of its last message."""


@dataclass(frozen=True)
class FailedPage:
    """A page of the error store, and where the next one starts."""

    messages: list[Failed]
    next_after: Cursor | None
    """The message the next page lists after; None when this page reached the last one."""


def failed(store: EventStore, inbox: str | None = None, *, discarded: bool = False) -> list[Failed]:
    """The messages waiting in the error store (of one inbox, or all), by inbox and oldest
    first; with `discarded`, those an operator discarded instead."""
    return [_shown(m) for m in _listed(store, inbox, discarded, None, None)]


def failed_page(
    store: EventStore, *, discarded: bool = False, after: Cursor | None = None, limit: int
) -> FailedPage:
    """At most `limit` of the messages `failed` lists, after the message `after`."""
    found = _listed(store, None, discarded, after, limit + 1)
    last = found[limit - 1] if len(found) > limit else None
    cursor = None if last is None else (last.inbox, last.failed_at, last.message_id)
    return FailedPage([_shown(m) for m in found[:limit]], cursor)


def _listed(
    store: EventStore, inbox: str | None, discarded: bool, after: Cursor | None, limit: int | None
) -> list[FailedMessage]:
    with _error_store(store) as errors:
        return errors.listed(inbox, discarded=discarded, after=after, limit=limit)


def failed_message(store: EventStore, inbox: str, message_id: str) -> Failed:
    """The message, waiting or discarded; `NotFound` if the error store has none."""
    with _error_store(store) as errors:
        return _shown(errors.find(inbox, message_id))


def failed_body(store: EventStore, inbox: str, message_id: str) -> str:
    """The body of a message still waiting, as it arrived; `NotFound` if the error store
    has none, `Problems` if it was discarded: the discard erased it."""
    message = failed_message(store, inbox, message_id)
    if message.discarded_at is not None:
        moment = message.discarded_at.strftime("%Y-%m-%d %H:%M:%S")
        raise Problems(
            f"message {message_id!r} of inbox {inbox!r} was discarded at {moment} UTC: "
            "its body was erased then"
        )
    return message.body


def to_settle(store: EventStore, inbox: str, message_id: str) -> Failed:
    """The message as an operator is about to resend or discard it; `NotFound` if there
    is none, `Problems` if it was discarded already."""
    with _error_store(store) as errors:
        return _shown(errors.unsettled(inbox, message_id))


def resend(store: EventStore, inbox: str, message_id: str) -> Failed:
    """Ask the running inbox to store the message again; what it looks like now.
    Refused as `to_settle` refuses."""
    # Re-checked in the transaction that marks it: it may have been settled meanwhile.
    with _error_store(store) as errors:
        return _shown(errors.resend(inbox, message_id))


def discard(store: EventStore, inbox: str, message_id: str, reason: str | None = None) -> Failed:
    """Settle the message without storing it: its body, headers and error message are
    erased, its record stays in the error store, marked discarded, with when and
    `reason`. Refused as `to_settle` refuses."""
    with _error_store(store) as errors:
        return _shown(errors.discard(inbox, message_id, reason))


@contextmanager
def _database(store: EventStore) -> Iterator[Database]:
    database = Database.of(None, store)
    try:
        yield database
    finally:
        database.close()


@contextmanager
def _error_store(store: EventStore) -> Iterator[InboxErrorStore]:
    """The error store in the store's database, with its refusals as the shells show them."""
    with _database(store) as database:
        try:
            yield InboxErrorStore(database)
        except FailedMessageNotFound as error:
            raise NotFound(str(error)) from error
        except MessageDiscarded as error:
            raise Problems(f"{error}: it is settled, not resent or discarded again") from error


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
        discarded_at=_moment(message.discarded_at),
        discard_reason=message.discard_reason,
    )
