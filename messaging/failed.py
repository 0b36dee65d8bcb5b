"""An inbox's error store: messages that could not become events, kept to be resent or
discarded.

One row per inbox and message id, in the store's database beside the
projections' tables: the message as it came (body, headers, subject), the
last error (`Type: message`) and a traceback of frames and types only
(`bare_traceback`: the message is kept once), how many times it was tried,
and whether an operator asked for it to be tried again (the running inbox
does that, with its own mapping, and forgets the row once the message is
stored: the event, which names the message id, is its record then).

A discard settles a message without storing it and erases what it said:
its body, headers and error message go, and the row stays as the record of
what was refused (its ids, the error's type, its attempts, when it failed,
when it was discarded and the reason the operator gave). A discarded message
is listed apart, and is neither resent nor discarded again. The same message
id failing again later (a client delivering it again) reopens the row: it is
failed again, its attempts counted on, and waits for an operator as any
other; the earlier discard is logged, not kept, since the row tells what the
message is now.

Whose personal data a message holds is what it says itself: the header
`eventcraft-data-subjects`, a JSON array of data subjects' ids (those the
store seals their fields under). A forget of one of them erases the messages
naming it as a discard does, and discards those still waiting. A message
naming no subject is reached by no forget: an operator discards it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import orjson
import sqlalchemy as sa
from eventcraft.eventstore import FORGOTTEN
from eventcraft.projections import Database, bare_traceback

from .errors import FailedMessageNotFound, MessageDiscarded
from .messages import IncomingMessage

FAILED = "eventcraft_inbox_failed"
"""The error store's table, in the store's database or an App's read-model database.

Public as `eventcraft.messaging.FAILED_TABLE`.

Example::

    import sqlalchemy as sa
    from eventcraft.eventstore import EventStore
    from eventcraft.messaging import FAILED_TABLE, Inbox, IncomingMessage, Mapped

    store = EventStore.open("sqlite:///shop.db")
    with Inbox("orders-in", store, lambda m: Mapped("order-7", "Received", m.json())) as inbox:
        inbox.take(IncomingMessage("msg-1", b"not json"))  # kept in the error store

    engine = sa.create_engine("sqlite:///shop.db")  # the inbox's database: the store's here
    with engine.connect() as connection:
        query = sa.text(f"SELECT inbox, message_id, attempts FROM {FAILED_TABLE}")
        assert connection.execute(query).all() == [("orders-in", "msg-1", 1)]
"""
DATA_SUBJECTS_HEADER = "eventcraft-data-subjects"
"""The header naming whose personal data a message holds: a JSON array of data subjects'
ids. A failed message naming them is erased when one of them is forgotten.

Example::

    from eventcraft.eventstore import EventStore
    from eventcraft.messaging import (
        DATA_SUBJECTS_HEADER, Inbox, InboxErrorStore, IncomingMessage, Mapped,
    )
    from eventcraft.projections import Database

    store = EventStore.open("sqlite:///shop.db")
    headers = {DATA_SUBJECTS_HEADER: '["customer-7"]'}
    with Inbox("signups-in", store, lambda m: Mapped("signups", "SignedUp", m.json())) as inbox:
        inbox.take(IncomingMessage("msg-1", b"name: Ann", headers))  # not JSON: kept

    errors = InboxErrorStore(Database.of(None, store))
    assert errors.listed()[0].data_subjects == ("customer-7",)
    assert errors.forget("customer-7") == 1  # Ann asked to be forgotten
    assert errors.listed(discarded=True)[0].body == b""
"""
DISCARDED = "<discarded>"
"""What a discarded message's error reads as after its type: its message was erased."""

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
    # JSON array: the data subjects the message named (`DATA_SUBJECTS_HEADER`); null in
    # rows made before the column was.
    sa.Column("data_subjects", sa.Text, nullable=True),
)

_ADDED = ("discarded_at", "discard_reason", "data_subjects")
"""Columns an error store made by an earlier release lacks: `create` adds them."""


@dataclass(frozen=True)
class FailedMessage:
    """A message an inbox could not store.

    Example::

        from eventcraft.eventstore import EventStore
        from eventcraft.messaging import Inbox, IncomingMessage, Mapped

        def order_received(message: IncomingMessage) -> Mapped:
            order = message.json()
            return Mapped(f"order-{order['id']}", "OrderReceived", order)

        store = EventStore.open("sqlite:///shop.db")
        with Inbox("orders-in", store, order_received) as inbox:
            assert inbox.take(IncomingMessage("msg-1", b'{"order": 7}')) is None  # no "id"
            [failed] = inbox.failures()
        assert (failed.inbox, failed.message_id, failed.attempts) == ("orders-in", "msg-1", 1)
        assert failed.error == "KeyError: 'id'" and failed.body == b'{"order": 7}'
        assert not failed.discarded and not failed.resend
    """

    inbox: str
    message_id: str
    subject: str
    body: bytes
    headers: dict[str, str]
    error: str
    """The last exception, as `Type: message`; `Type: <discarded>` once discarded,
    `Type: <forgotten>` once a data subject it names is forgotten."""
    traceback: str
    """Where it was raised: frames and exception types, no message (`bare_traceback`)."""
    attempts: int
    """How many times it was taken in and failed."""
    failed_at: float
    resend: bool
    """An operator asked for it to be tried again; the running inbox will."""
    discarded_at: float | None = None
    """When an operator discarded it (seconds since the epoch); None while it waits."""
    discard_reason: str | None = None
    """What the operator said when discarding it, if anything."""
    data_subjects: tuple[str, ...] = ()
    """Whose personal data it holds, as its `DATA_SUBJECTS_HEADER` said."""

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
    values["data_subjects"] = tuple(orjson.loads(values["data_subjects"] or "[]"))
    return FailedMessage(**values)


def data_subjects(message_id: str, headers: Mapping[str, str]) -> tuple[str, ...]:
    """The data subjects `headers` name (`DATA_SUBJECTS_HEADER`), sorted; none without the
    header. A header that is not a JSON array of strings is logged and names none: the
    failure is kept all the same."""
    found = headers.get(DATA_SUBJECTS_HEADER)
    if found is None:
        return ()
    try:
        subjects = orjson.loads(found)
    except orjson.JSONDecodeError:
        subjects = None
    if not isinstance(subjects, list) or not all(isinstance(s, str) and s for s in subjects):
        log.warning(
            "message %r: the %s header is not a JSON array of subjects' ids, so no forget "
            "reaches the message: %r",
            message_id,
            DATA_SUBJECTS_HEADER,
            found[:200],
        )
        return ()
    return tuple(sorted(set(subjects)))


def record(
    connection: sa.Connection,
    inbox: str,
    message: IncomingMessage,
    error: BaseException,
    *,
    subjects: Collection[str] = (),
) -> None:
    """Keep `message` with `error`; a message failing again counts one more attempt, and
    one discarded before is open again. Its data subjects are those its header names and
    `subjects`."""
    found = find(connection, inbox, message.message_id, lock=True)
    named = set(data_subjects(message.message_id, message.headers)) | set(subjects)
    values = {
        "subject": message.subject,
        "body": message.body,
        "headers": orjson.dumps(dict(message.headers)).decode(),
        "error": f"{type(error).__name__}: {error}",
        "traceback": bare_traceback(error),
        "failed_at": time.time(),
        "resend": False,
        "discarded_at": None,
        "discard_reason": None,
        "data_subjects": orjson.dumps(sorted(named)).decode(),
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
    connection: sa.Connection,
    inbox: str | None = None,
    *,
    discarded: bool = False,
    after: tuple[str, float, str] | None = None,
    limit: int | None = None,
) -> list[FailedMessage]:
    """The messages waiting to be settled, or with `discarded` those discarded, by inbox,
    time and id; those after `after` (an inbox, a time and an id) alone, at most `limit`
    (a page: the next one starts after the last message listed)."""
    order = (table.c.inbox, table.c.failed_at, table.c.message_id)
    query = sa.select(table).order_by(*order).limit(limit)
    if after is not None:
        query = query.where(sa.tuple_(*order) > sa.tuple_(*map(sa.literal, after)))
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
        raise FailedMessageNotFound(_not_found(inbox, message_id))
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
    """Settle the message without storing it, its body, headers and error message erased,
    the row kept as its record; refused as `unsettled` refuses."""
    waiting = unsettled(connection, inbox, message_id, lock=True)
    connection.execute(
        sa.update(table)
        .where(_key(inbox, message_id))
        .values(
            discarded_at=time.time(),
            discard_reason=reason or None,
            resend=False,
            **_erased(waiting, DISCARDED),
        )
    )
    found = find(connection, inbox, message_id)
    assert found is not None
    return found


def forget(connection: sa.Connection, subject: str) -> int:
    """Erase the messages naming the data subject `subject`, as a discard does, and
    discard those still waiting (the reason says why); how many it erased."""
    named = orjson.dumps(subject).decode()
    query = sa.select(table).where(table.c.data_subjects.contains(named, autoescape=True))
    erased = 0
    for found in [_row(row) for row in connection.execute(query.with_for_update())]:
        values = _erased(found, FORGOTTEN)
        if subject not in found.data_subjects or _unchanged(found, values):
            continue
        if not found.discarded:
            values.update(
                discarded_at=time.time(),
                discard_reason="a data subject it names was forgotten",
                resend=False,
            )
        connection.execute(
            sa.update(table).where(_key(found.inbox, found.message_id)).values(**values)
        )
        erased += 1
    return erased


def _unchanged(found: FailedMessage, values: dict[str, object]) -> bool:
    """Whether the row says nothing more than `values` would leave: erased before."""
    return not found.body and found.headers == {} and found.error == values["error"]


def _erased(found: FailedMessage, replacement: str) -> dict[str, object]:
    """What a row keeps of a message once what it said is erased."""
    kind = found.error.split(":", 1)[0]
    values: dict[str, object] = {
        "body": b"",
        "headers": "{}",
        "error": f"{kind}: {replacement}",
    }
    # A traceback made before they were bare ends in the message.
    if not found.traceback.rstrip().endswith(kind) or found.error in found.traceback:
        values["traceback"] = replacement
    return values


def remove(connection: sa.Connection, inbox: str, message_id: str) -> bool:
    """Forget the message: it was stored, and its event is its record now."""
    done = connection.execute(sa.delete(table).where(_key(inbox, message_id)))
    return done.rowcount == 1


def _key(inbox: str, message_id: str) -> sa.ColumnElement[bool]:
    return sa.and_(table.c.inbox == inbox, table.c.message_id == message_id)


class InboxErrorStore:
    """The inboxes' error store in one database, as an operator reaches it from outside
    any inbox: its messages listed, looked at, resent (the running inbox stores them
    again, with its own mapping) or discarded, and those naming a forgotten data subject
    erased.

    Each call is a transaction of its own, which re-reads what it acts on. A database no
    inbox ever used holds no error store: nothing is listed or erased there, and nothing
    created; one an earlier release made is brought up to date first.

    Example::

        from eventcraft.eventstore import EventStore
        from eventcraft.messaging import Inbox, InboxErrorStore, IncomingMessage, Mapped
        from eventcraft.projections import Database

        store = EventStore.open("sqlite:///shop.db")
        inbox = Inbox("orders-in", store, lambda m: Mapped("order-7", "Received", m.json()))
        inbox.take(IncomingMessage("msg-1", b"not json"))  # kept in the error store

        errors = InboxErrorStore(Database.of(None, store))  # the store's own database
        for message in errors.listed("orders-in"):
            errors.resend(message.inbox, message.message_id)
        assert errors.find("orders-in", "msg-1").resend
        inbox.take_resends()  # as the running inbox's step() does: here it fails again
        assert errors.find("orders-in", "msg-1").attempts == 2
    """

    def __init__(self, database: Database) -> None:
        self.database = database

    def listed(
        self,
        inbox: str | None = None,
        *,
        discarded: bool = False,
        after: tuple[str, float, str] | None = None,
        limit: int | None = None,
    ) -> list[FailedMessage]:
        """The messages waiting to be settled (of one inbox, or all), or with `discarded`
        those discarded, by inbox, time and id; those after `after` (an inbox, a time and
        an id) alone, at most `limit` (a page: the next starts after its last message)."""
        if not self._opened():
            return []
        with self.database.reading() as connection:
            return listed(connection, inbox, discarded=discarded, after=after, limit=limit)

    def find(self, inbox: str, message_id: str) -> FailedMessage:
        """The message, waiting or discarded; `FailedMessageNotFound` if there is none."""
        with self._used(inbox, message_id) as connection:
            found = find(connection, inbox, message_id)
        if found is None:
            raise FailedMessageNotFound(_not_found(inbox, message_id))
        return found

    def unsettled(self, inbox: str, message_id: str) -> FailedMessage:
        """The message as an operator may still resend or discard it;
        `FailedMessageNotFound` if there is none, `MessageDiscarded` if it was discarded."""
        with self._used(inbox, message_id) as connection:
            return unsettled(connection, inbox, message_id)

    def resend(self, inbox: str, message_id: str) -> FailedMessage:
        """Ask the running inbox to store the message again; what it looks like now.
        Refused as `unsettled` refuses, in the transaction that marks it."""
        with self._used(inbox, message_id, write=True) as connection:
            return mark_resend(connection, inbox, message_id)

    def discard(self, inbox: str, message_id: str, reason: str | None = None) -> FailedMessage:
        """Settle the message without storing it: its body, headers and error message are
        erased, its record stays, marked discarded, with when and `reason`. Refused as
        `unsettled` refuses, in the transaction that discards it."""
        with self._used(inbox, message_id, write=True) as connection:
            return discard(connection, inbox, message_id, reason)

    def forget(self, subject: str) -> int | None:
        """Erase the messages naming the data subject `subject`, as a discard does, and
        discard those still waiting; how many it erased. None where no inbox ever ran, 0
        in an error store made before messages named their subjects (none does)."""
        with self.database.transaction() as connection:
            if not exists(connection):
                return None
            if outdated(connection):
                return 0
            return forget(connection, subject)

    def _opened(self) -> bool:
        """Whether there is an error store, brought up to date if an earlier release made
        it. A database no inbox ever used has none: nothing failed, nothing to create."""
        with self.database.reading() as connection:
            if not exists(connection):
                return False
            if not outdated(connection):
                return True
        with self.database.transaction() as connection:
            create(connection)
        return True

    @contextmanager
    def _used(self, inbox: str, message_id: str, *, write: bool = False) -> Iterator[sa.Connection]:
        """A look at (or a transaction on) the error store that names the message;
        `FailedMessageNotFound` where there is no error store."""
        if not self._opened():
            raise FailedMessageNotFound(_not_found(inbox, message_id))
        with self.database.transaction() if write else self.database.reading() as connection:
            yield connection


def _not_found(inbox: str, message_id: str) -> str:
    return f"inbox {inbox!r} has no failed message with id {message_id!r}"
