"""The error store: events a handler failed on, kept until retried or discarded.

An entry names its event by position (and id, stream, version, type), never
copies its data. What the handler raised is kept in two parts: `error`, the
exception's type and message, and a traceback of frames and types only
(`bare_traceback`). A message may quote the event's data, personal fields
included: `forget_errors` replaces it (an operator's forget of one of the
event's data subjects), and the traceback still says where the handler failed.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Collection

import sqlalchemy as sa
from eventcraft.eventstore import RecordedEvent

from . import clock
from .database import Database
from .schema import PARKED, checkpoints
from .schema import parked as table
from .tracebacks import bare_traceback


@dataclasses.dataclass(frozen=True)
class ParkedEvent:
    """An event a projection's handler failed on, parked until it is retried or discarded.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections import ErrorPolicy, ParkedEvent, ProjectionRunner, Subscription

        def ship(event):
            raise KeyError(event.data["sku"])

        shipping = Subscription("shipping", ship, on_error=ErrorPolicy(attempts=1, then="skip"))
        store = EventStore.open("sqlite:///shop.db")
        store.append("order-1", [NewEvent("OrderPaid", {"sku": "tea"})])
        with ProjectionRunner(store, [shipping]) as runner:
            runner.catch_up()
            parked: list[ParkedEvent] = runner.parked("shipping")
            (event,) = parked
            assert (event.position, event.stream_id, event.type) == (1, "order-1", "OrderPaid")
            assert event.error == "KeyError: 'tea'" and event.attempts == 1
            assert "in ship" in event.traceback  # where, without the message
            runner.discard_parked("shipping", event.position)
            assert runner.parked("shipping") == []
        store.close()
    """

    projection: str
    position: int
    """The event's position in the global log; with the projection, its key here."""
    event_id: str
    stream_id: str
    version: int
    type: str
    error: str
    """The last exception, as `Type: message`; once a data subject of the event is
    forgotten, `Type: <forgotten>`."""
    traceback: str
    """Where it was raised: frames and exception types, no message (`bare_traceback`)."""
    attempts: int
    """How many times the handler was tried."""
    parked_at: float
    claimed_by: str | None = None
    """The runner retrying it at this moment (`retry_parked`), if any."""
    claimed_until: float | None = None
    """When that claim lapses unless renewed (seconds since the epoch): a claim left
    by a process that died while retrying lapses, and the next retry takes it."""


def park(
    connection: sa.Connection,
    name: str,
    event: RecordedEvent,
    error: BaseException,
    attempts: int,
) -> None:
    remove(connection, name, event.position)
    connection.execute(
        sa.insert(table).values(
            projection=name,
            position=event.position,
            event_id=str(event.id),
            stream_id=event.stream_id,
            version=event.version,
            type=event.type,
            error=f"{type(error).__name__}: {error}",
            traceback=bare_traceback(error),
            attempts=attempts,
            parked_at=time.time(),
        )
    )


def claim(connection: sa.Connection, name: str, position: int, owner: str, *, ttl: float) -> bool:
    """Mark the entry as retried by `owner` for `ttl` seconds, unless another's claim is
    live; True if `owner` holds it now. One statement, so that of two claimers that
    both read the entry unclaimed, only the first to write gets it. Claims are timed by
    the database's clock, as leases are (`clock.py`)."""
    now = clock.now(connection)
    claimed = connection.execute(
        sa.update(table)
        .where(
            table.c.projection == name,
            table.c.position == position,
            sa.or_(table.c.claimed_by.is_(None), table.c.claimed_until < now),
        )
        .values(claimed_by=owner, claimed_until=now + ttl)
    )
    return claimed.rowcount == 1


def renew_claim(
    connection: sa.Connection, name: str, position: int, owner: str, *, ttl: float
) -> bool:
    """Extend `owner`'s claim on the entry by `ttl` from now; False if it no longer holds
    it."""
    renewed = connection.execute(
        sa.update(table)
        .where(
            table.c.projection == name, table.c.position == position, table.c.claimed_by == owner
        )
        .values(claimed_until=clock.now(connection) + ttl)
    )
    return renewed.rowcount == 1


def unclaim(connection: sa.Connection, name: str, position: int, owner: str) -> None:
    """Give back `owner`'s claim: the entry stays parked, as it was."""
    connection.execute(
        sa.update(table)
        .where(
            table.c.projection == name, table.c.position == position, table.c.claimed_by == owner
        )
        .values(claimed_by=None, claimed_until=None)
    )


def remove_claimed(connection: sa.Connection, name: str, position: int, owner: str) -> None:
    """Forget the entry `owner` claimed and has now applied; one another took over
    since (`owner`'s claim lapsed) is that one's to settle."""
    connection.execute(
        sa.delete(table).where(
            table.c.projection == name, table.c.position == position, table.c.claimed_by == owner
        )
    )


def listed(
    connection: sa.Connection, name: str, *, after: int = 0, limit: int | None = None
) -> list[ParkedEvent]:
    """The events parked by `name` after position `after`, in position order, at most
    `limit` (a page: the next one starts after the last position listed)."""
    query = (
        sa.select(table)
        .where(table.c.projection == name, table.c.position > after)
        .order_by(table.c.position)
        .limit(limit)
    )
    return [ParkedEvent(*row) for row in connection.execute(query)]


def find(connection: sa.Connection, name: str, position: int) -> ParkedEvent | None:
    row = connection.execute(
        sa.select(table).where(table.c.projection == name, table.c.position == position)
    ).one_or_none()
    return None if row is None else ParkedEvent(*row)


def remove(connection: sa.Connection, name: str, position: int) -> None:
    connection.execute(
        sa.delete(table).where(table.c.projection == name, table.c.position == position)
    )


def settle(connection: sa.Connection, name: str, after: int, upto: int) -> None:
    """Forget the events parked in (after, upto]: they have now been applied."""
    connection.execute(
        sa.delete(table).where(
            table.c.projection == name, table.c.position > after, table.c.position <= upto
        )
    )


def summary(connection: sa.Connection, names: list[str]) -> dict[str, tuple[int, int | None]]:
    """Per projection with parked events: how many, and where a "stop" halted it.

    A parked event beyond the checkpoint is one the projection stopped on.
    """
    beyond = sa.case((table.c.position > checkpoints.c.position, table.c.position))
    rows = connection.execute(
        sa.select(table.c.projection, sa.func.count(), sa.func.min(beyond))
        .join(checkpoints, checkpoints.c.name == table.c.projection)
        .where(table.c.projection.in_(names))
        .group_by(table.c.projection)
    )
    return {name: (int(count), stop) for name, count, stop in rows}


def exists(connection: sa.Connection) -> bool:
    """Whether this database holds an error store (a projection ran here)."""
    return sa.inspect(connection).has_table(PARKED)


def positions(connection: sa.Connection) -> set[int]:
    """The positions of the events parked here, by any projection (defined now or not)."""
    return set(connection.scalars(sa.select(table.c.position).distinct()))


def parked_positions(database: Database) -> set[int] | None:
    """The positions of the events parked in `database` by any projection (defined now
    or not); None if no projection ever ran there (it holds no error store).

    Example::

        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections import (
            Database, ErrorPolicy, ProjectionRunner, Subscription, parked_positions,
        )

        def mail(event):
            raise ValueError(f"no address for {event.data['customer']}")

        store = EventStore.open("sqlite:///shop.db")
        database = Database.of(None, store)
        assert parked_positions(database) is None  # no projection ever ran here
        store.append("order-1", [NewEvent("OrderPaid", {"customer": "ann"})])
        mailer = Subscription("mailer", mail, on_error=ErrorPolicy(attempts=1, then="skip"))
        with ProjectionRunner(store, [mailer], database=database) as runner:
            runner.catch_up()
        assert parked_positions(database) == {1}  # what a forget of ann must reach
        database.close()
        store.close()
    """
    with database.reading() as connection:
        return positions(connection) if exists(connection) else None


def forget_parked_errors(database: Database, at: Collection[int], replacement: str) -> int:
    """`forget_errors` in a transaction of its own on `database`: `replacement` in place
    of the message of every error parked at the positions `at`; how many changed.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections import (
            ErrorPolicy, ProjectionRunner, Subscription, forget_parked_errors,
        )

        def mail(event):
            raise ValueError(f"no address for {event.data['customer']}")

        store = EventStore.open("sqlite:///shop.db")
        store.append("order-1", [NewEvent("OrderPaid", {"customer": "Ann Smith"})])
        mailer = Subscription("mailer", mail, on_error=ErrorPolicy(attempts=1, then="skip"))
        with ProjectionRunner(store, [mailer]) as runner:
            runner.catch_up()
            assert runner.parked("mailer")[0].error == "ValueError: no address for Ann Smith"
            assert forget_parked_errors(runner.database, {1}, "<forgotten>") == 1  # Ann's events
            assert runner.parked("mailer")[0].error == "ValueError: <forgotten>"
        store.close()
    """
    with database.transaction() as connection:
        return forget_errors(connection, at, replacement)


def forget_errors(connection: sa.Connection, at: Collection[int], replacement: str) -> int:
    """Put `replacement` in place of the message of every error parked at the positions
    `at`, by any projection, keeping the exception's type; how many entries changed.
    Entries made by earlier releases, whose traceback ends in the message, lose the
    traceback's text too."""
    changed = 0
    wanted = sorted(at)
    for start in range(0, len(wanted), 500):
        rows = connection.execute(
            sa.select(table.c.projection, table.c.position, table.c.error, table.c.traceback).where(
                table.c.position.in_(wanted[start : start + 500])
            )
        ).all()
        for name, position, error, trace in rows:
            kind = str(error).split(":", 1)[0]
            erased = f"{kind}: {replacement}"
            if error == erased:
                continue
            values = {"error": erased}
            if str(error) in str(trace) or not str(trace).rstrip().endswith(kind):
                values["traceback"] = replacement
            connection.execute(
                sa.update(table)
                .where(table.c.projection == name, table.c.position == position)
                .values(**values)
            )
            changed += 1
    return changed
