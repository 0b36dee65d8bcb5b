"""An inbox's error store: messages that could not become events, kept to be resent or
discarded.

One row per inbox and message id, in the store's database beside the
projections' tables: the message as it came (body, headers, subject), the
last error and its traceback, how many times it was tried, and whether an
operator asked for it to be tried again (the running inbox does that, with
its own mapping, and forgets the row once the message is stored: the event,
which names the message id, is its record then).

A discard settles a message without storing it, and keeps it: the row stays,
with when it was discarded and the reason the operator gave, so the error
store remains the record of what was refused and what became of it. A
discarded message is listed apart, and is neither resent nor discarded again.
The same message id failing again later (a client delivering it again) reopens
the row: it is failed again, its attempts counted on, and waits for an operator
as any other; the earlier discard is logged, not kept, since the row tells
what the message is now.
"""

from __future__ import annotations

import logging
import time
import traceback
from dataclasses import dataclass

import orjson
import sqlalchemy as sa

from .errors import FailedMessageNotFound, MessageDiscarded
from .messages import IncomingMessage

FAILED = "eventcraft_inbox_failed"

log = logging.getLogger("eventcraft.messaging")

metadata = sa.MetaData()

table = sa.Table(
    FAILED,
    metadata,
    sa.Column("inbox", sa.Text, primary_key=True),
    sa.Column("message_id", sa.Text, primary_key=True),
    sa.Column("subject", sa.Text, nullable=False),
    sa.Column("body", sa.LargeBinary, nullable=False),
    # JSON text: header names to values, as the broker gave them.
    sa.Column("headers", sa.Text, nullable=False),
    sa.Column("error", sa.Text, nullable=False),
    sa.Column("traceback", sa.Text, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("failed_at", sa.Float, nullable=False),
    sa.Column("resend", sa.Boolean, nullable=False),
    # When an operator discarded it (seconds since the epoch), and why; both null while
    # it waits to be settled.
    sa.Column("discarded_at", sa.Float, nullable=True),
    sa.Column("discard_reason", sa.Text, nullable=True),
)

_ADDED = ("discarded_at", "discard_reason")
"""Columns an error store made by an earlier release lacks: `create` adds them."""


@dataclass(frozen=True)
class FailedMessage:
    """A message an inbox could not store."""

    inbox: str
    message_id: str
    subject: str
    body: bytes
    headers: dict[str, str]
    error: str
    """The last exception, as `Type: message`."""
    traceback: str
    attempts: int
    """How many times it was taken in and failed."""
    failed_at: float
    resend: bool
    """An operator asked for it to be tried again; the running inbox will."""
    discarded_at: float | None = None
    """When an operator discarded it (seconds since the epoch); None while it waits."""
    discard_reason: str | None = None
    """What the operator said when discarding it, if anything."""

    @property
    def message(self) -> IncomingMessage:
        return IncomingMessage(self.message_id, self.body, self.headers, self.subject)

    @property
    def discarded(self) -> bool:
        return self.discarded_at is not None


def create(connection: sa.Connection) -> None:
    """Create the error store, or bring one an earlier release made up to date."""
    if connection.dialect.name == "postgresql":
        connection.execute(
            sa.text(
                "SELECT pg_advisory_xact_lock("
                "hashtext('eventcraft-inbox-failed:' || current_schema()))"
            )
        )
    metadata.create_all(connection, checkfirst=True)
    # Under the lock above (PostgreSQL) or the write lock every transaction takes
    # (SQLite): two processes never both add a column.
    for name in _missing(connection):
        kind = table.c[name].type.compile(dialect=connection.dialect)
        connection.execute(sa.text(f"ALTER TABLE {FAILED} ADD COLUMN {name} {kind}"))


def exists(connection: sa.Connection) -> bool:
    return sa.inspect(connection).has_table(FAILED)


def outdated(connection: sa.Connection) -> bool:
    """Whether the (existing) error store lacks columns `create` would add."""
    return bool(_missing(connection))


def _missing(connection: sa.Connection) -> list[str]:
    present = {column["name"] for column in sa.inspect(connection).get_columns(FAILED)}
    return [name for name in _ADDED if name not in present]


def _row(row: sa.Row[tuple[object, ...]]) -> FailedMessage:
    values = dict(row._mapping)
    values["headers"] = orjson.loads(str(values["headers"]))
    values["body"] = bytes(values["body"])
    return FailedMessage(**values)


def record(
    connection: sa.Connection, inbox: str, message: IncomingMessage, error: BaseException
) -> None:
    """Keep `message` with `error`; a message failing again counts one more attempt, and
    one discarded before is open again."""
    found = find(connection, inbox, message.message_id, lock=True)
    values = {
        "subject": message.subject,
        "body": message.body,
        "headers": orjson.dumps(dict(message.headers)).decode(),
        "error": f"{type(error).__name__}: {error}",
        "traceback": "".join(traceback.format_exception(error)),
        "failed_at": time.time(),
        "resend": False,
        "discarded_at": None,
        "discard_reason": None,
    }
    if found is None:
        connection.execute(
            sa.insert(table).values(
                inbox=inbox, message_id=message.message_id, attempts=1, **values
            )
        )
        return
    if found.discarded:
        log.warning(
            "inbox %r: message %r, discarded at %s (%s), failed again: it waits to be settled",
            inbox,
            message.message_id,
            time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(found.discarded_at)),
            found.discard_reason or "no reason given",
        )
    connection.execute(
        sa.update(table)
        .where(_key(inbox, message.message_id))
        .values(attempts=found.attempts + 1, **values)
    )


def listed(
    connection: sa.Connection, inbox: str | None = None, *, discarded: bool = False
) -> list[FailedMessage]:
    """The messages waiting to be settled, or with `discarded` those discarded."""
    query = sa.select(table).order_by(table.c.inbox, table.c.failed_at, table.c.message_id)
    settled = table.c.discarded_at.is_not(None) if discarded else table.c.discarded_at.is_(None)
    query = query.where(settled)
    if inbox is not None:
        query = query.where(table.c.inbox == inbox)
    return [_row(row) for row in connection.execute(query)]


def find(
    connection: sa.Connection, inbox: str, message_id: str, *, lock: bool = False
) -> FailedMessage | None:
    """The message, discarded or not."""
    query = sa.select(table).where(_key(inbox, message_id))
    if lock:
        query = query.with_for_update()
    row = connection.execute(query).one_or_none()
    return None if row is None else _row(row)


def unsettled(
    connection: sa.Connection, inbox: str, message_id: str, *, lock: bool = False
) -> FailedMessage:
    """The message as an operator may still resend or discard it; `FailedMessageNotFound`
    if there is none, `MessageDiscarded` if it was discarded."""
    found = find(connection, inbox, message_id, lock=lock)
    if found is None:
        raise FailedMessageNotFound(f"inbox {inbox!r} has no failed message with id {message_id!r}")
    if found.discarded_at is not None:
        raise MessageDiscarded(inbox, message_id, found.discarded_at, found.discard_reason)
    return found


def to_resend(connection: sa.Connection, inbox: str, limit: int) -> list[FailedMessage]:
    rows = connection.execute(
        sa.select(table)
        .where(
            table.c.inbox == inbox,
            table.c.resend.is_(True),
            table.c.discarded_at.is_(None),
        )
        .order_by(table.c.failed_at)
        .limit(limit)
    )
    return [_row(row) for row in rows]


def mark_resend(connection: sa.Connection, inbox: str, message_id: str) -> FailedMessage:
    """Ask the running inbox to store the message again; refused as `unsettled` refuses."""
    unsettled(connection, inbox, message_id, lock=True)
    connection.execute(sa.update(table).where(_key(inbox, message_id)).values(resend=True))
    found = find(connection, inbox, message_id)
    assert found is not None
    return found


def discard(
    connection: sa.Connection, inbox: str, message_id: str, reason: str | None = None
) -> FailedMessage:
    """Settle the message without storing it, keeping it; refused as `unsettled` refuses."""
    unsettled(connection, inbox, message_id, lock=True)
    connection.execute(
        sa.update(table)
        .where(_key(inbox, message_id))
        .values(discarded_at=time.time(), discard_reason=reason or None, resend=False)
    )
    found = find(connection, inbox, message_id)
    assert found is not None
    return found


def remove(connection: sa.Connection, inbox: str, message_id: str) -> bool:
    """Forget the message: it was stored, and its event is its record now."""
    done = connection.execute(sa.delete(table).where(_key(inbox, message_id)))
    return done.rowcount == 1


def _key(inbox: str, message_id: str) -> sa.ColumnElement[bool]:
    return sa.and_(table.c.inbox == inbox, table.c.message_id == message_id)
