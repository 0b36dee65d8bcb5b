"""The error store: events a handler failed on, kept until retried or discarded."""

from __future__ import annotations

import dataclasses
import time
import traceback

import sqlalchemy as sa
from eventcraft.eventstore import RecordedEvent

from .schema import checkpoints
from .schema import parked as table


@dataclasses.dataclass(frozen=True)
class ParkedEvent:
    projection: str
    position: int
    """The event's position in the global log; with the projection, its key here."""
    event_id: str
    stream_id: str
    version: int
    type: str
    error: str
    """The last exception, as `Type: message`."""
    traceback: str
    attempts: int
    """How many times the handler was tried."""
    parked_at: float


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
            traceback="".join(traceback.format_exception(error)),
            attempts=attempts,
            parked_at=time.time(),
        )
    )


def restore(connection: sa.Connection, event: ParkedEvent) -> None:
    """Put back an entry taken out of the error store, as it was."""
    remove(connection, event.projection, event.position)
    connection.execute(sa.insert(table).values(**dataclasses.asdict(event)))


def listed(connection: sa.Connection, name: str) -> list[ParkedEvent]:
    rows = connection.execute(
        sa.select(table).where(table.c.projection == name).order_by(table.c.position)
    )
    return [ParkedEvent(*row) for row in rows]


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
