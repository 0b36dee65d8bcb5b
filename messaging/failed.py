"""An inbox's error store: messages that could not become events, kept to be resent.

One row per inbox and message id, in the store's database beside the
projections' tables: the message as it came (body, headers, subject), the
last error and its traceback, how many times it was tried, and whether an
operator asked for it to be tried again (the running inbox does that, with
its own mapping, and forgets the row once the message is stored).
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass

import orjson
import sqlalchemy as sa

from .messages import IncomingMessage

FAILED = "eventcraft_inbox_failed"

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
)


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

    @property
    def message(self) -> IncomingMessage:
        return IncomingMessage(self.message_id, self.body, self.headers, self.subject)


def create(connection: sa.Connection) -> None:
    if connection.dialect.name == "postgresql":
        connection.execute(
            sa.text(
                "SELECT pg_advisory_xact_lock("
                "hashtext('eventcraft-inbox-failed:' || current_schema()))"
            )
        )
    metadata.create_all(connection, checkfirst=True)


def _row(row: sa.Row[tuple[object, ...]]) -> FailedMessage:
    values = dict(row._mapping)
    values["headers"] = orjson.loads(str(values["headers"]))
    values["body"] = bytes(values["body"])
    return FailedMessage(**values)


def record(
    connection: sa.Connection, inbox: str, message: IncomingMessage, error: BaseException
) -> None:
    """Keep `message` with `error`; a message failing again counts one more attempt."""
    found = find(connection, inbox, message.message_id, lock=True)
    values = {
        "subject": message.subject,
        "body": message.body,
        "headers": orjson.dumps(dict(message.headers)).decode(),
        "error": f"{type(error).__name__}: {error}",
        "traceback": "".join(traceback.format_exception(error)),
        "failed_at": time.time(),
        "resend": False,
    }
    if found is None:
        connection.execute(
            sa.insert(table).values(
                inbox=inbox, message_id=message.message_id, attempts=1, **values
            )
        )
    else:
        connection.execute(
            sa.update(table)
            .where(_key(inbox, message.message_id))
            .values(attempts=found.attempts + 1, **values)
        )


def listed(connection: sa.Connection, inbox: str | None = None) -> list[FailedMessage]:
    query = sa.select(table).order_by(table.c.inbox, table.c.failed_at, table.c.message_id)
    if inbox is not None:
        query = query.where(table.c.inbox == inbox)
    return [_row(row) for row in connection.execute(query)]


def find(
    connection: sa.Connection, inbox: str, message_id: str, *, lock: bool = False
) -> FailedMessage | None:
    query = sa.select(table).where(_key(inbox, message_id))
    if lock:
        query = query.with_for_update()
    row = connection.execute(query).one_or_none()
    return None if row is None else _row(row)


def to_resend(connection: sa.Connection, inbox: str, limit: int) -> list[FailedMessage]:
    rows = connection.execute(
        sa.select(table)
        .where(table.c.inbox == inbox, table.c.resend.is_(True))
        .order_by(table.c.failed_at)
        .limit(limit)
    )
    return [_row(row) for row in rows]


def mark_resend(connection: sa.Connection, inbox: str, message_id: str) -> bool:
    done = connection.execute(sa.update(table).where(_key(inbox, message_id)).values(resend=True))
    return done.rowcount == 1


def remove(connection: sa.Connection, inbox: str, message_id: str) -> bool:
    done = connection.execute(sa.delete(table).where(_key(inbox, message_id)))
    return done.rowcount == 1


def _key(inbox: str, message_id: str) -> sa.ColumnElement[bool]:
    return sa.and_(table.c.inbox == inbox, table.c.message_id == message_id)
