"""Checkpoints carried to a moved log: a read-model database's checkpoints, and the
events parked there, renumbered from the positions of the log a tenant moved from to
those of the log it moved to (`eventstore.move_tenant`'s `PositionMap`).

A checkpoint at old position P means every event up to P was applied and none after; it
becomes the new position of the last event at or before P, so a runner on the moved
log goes on with the first event it has not applied: none twice, none skipped. A parked
event, kept by its position, gets its event's new one.

**Once.** A second carry would renumber new positions as if they were old. So the
database records, beside its checkpoints (`CHECKPOINT_LOG`), which log they are numbered
by: a carry to that log finds it done (`CarriedCheckpoints.already`), and a carry from a
log they are not numbered by is refused. Everything is one transaction: the checkpoints,
the parked events and that record move together or not at all.

**Stopped runners.** A checkpoint whose lease is current is in a runner's hands: the
carry is refused until it stops (its lease given back or lapsed), and nothing changes. A
checkpoint past the copy (the log took more events after the move began, and a runner
applied them) is refused too: move the tenant again, then carry.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import sqlalchemy as sa
from eventcraft.eventstore import PositionMap

from . import clock
from .database import Database
from .errors import ProjectionError
from .schema import checkpoints, parked

CHECKPOINT_LOG = "eventcraft_checkpoint_log"
"""The table recording which log a read-model database's checkpoints are numbered by, once
they were carried to a moved one."""

_ONLY = 1
_log = sa.Table(
    CHECKPOINT_LOG,
    sa.MetaData(),
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("log", sa.Text, nullable=False),
    sa.Column("carried_at", sa.Float, nullable=False),
)


@dataclass(frozen=True)
class CarriedCheckpoints:
    """What carrying a read-model database's checkpoints to a moved log did.

    Example::

        import sqlalchemy as sa
        from eventcraft.eventstore import EventStore, NewEvent, move_tenant_log
        from eventcraft.projections import (
            Database, ProjectionRunner, Subscription, carry_checkpoints, checkpoint_positions,
        )

        read_models = Database(sa.create_engine("sqlite:///read-models.db"))
        mail = Subscription("mail", lambda event: None)
        with EventStore.open("sqlite:///old.db") as old, EventStore.open("sqlite:///new.db") as new:
            old.append("order-1", [NewEvent("Placed", {}), NewEvent("Paid", {})])
            with ProjectionRunner(old, [mail], database=read_models) as runner:
                runner.catch_up()
            carried = carry_checkpoints(read_models, move_tenant_log(old, new).positions)
        assert carried.checkpoints == {"mail": (2, 2)} and not carried.already
        assert checkpoint_positions(read_models, ["mail"]) == {"mail": 2}
        read_models.close()
    """

    checkpoints: dict[str, tuple[int, int]]
    """Each checkpoint carried, by name: its old position and its new one."""
    parked: int
    """Parked events given their event's new position."""
    already: bool
    """Whether the checkpoints were numbered by the moved log already (an earlier carry):
    nothing changed."""


def carry_checkpoints(database: Database, positions: PositionMap) -> CarriedCheckpoints:
    """Renumber `database`'s checkpoints and parked events from the log `positions` maps
    from to the log it maps to, in one transaction (see `carried_checkpoints.py`); done
    once, however often called. `ProjectionError` (nothing changed) if a runner holds a
    checkpoint's lease, a checkpoint is past the copy, or the checkpoints are numbered by
    another log. A database where no runner ran has nothing to carry.

    Example::

        import sqlalchemy as sa
        from eventcraft.eventstore import EventStore, NewEvent, move_tenant_log
        from eventcraft.projections import Database, ProjectionRunner, Subscription
        from eventcraft.projections import carry_checkpoints

        applied = []
        mail = Subscription("mail", applied.append)
        read_models = Database(sa.create_engine("sqlite:///read-models.db"))
        with EventStore.open("sqlite:///old.db") as old, EventStore.open("sqlite:///new.db") as new:
            old.append("order-1", [NewEvent("Placed", {})])
            with ProjectionRunner(old, [mail], database=read_models) as runner:
                runner.catch_up()  # applied the first event at the old place
            old.append("order-1", [NewEvent("Paid", {})])
            positions = move_tenant_log(old, new).positions
            assert not carry_checkpoints(read_models, positions).already
            assert carry_checkpoints(read_models, positions).already  # once
            with ProjectionRunner(new, [mail], database=read_models) as runner:
                runner.catch_up()  # goes on at the new place
        assert [event.type for event in applied] == ["Placed", "Paid"]
        read_models.close()
    """
    if not isinstance(positions, PositionMap):
        raise ProjectionError(f"a carry takes the PositionMap of a move, not {positions!r}")
    with database.transaction() as connection:
        if not sa.inspect(connection).has_table(checkpoints.name):
            return CarriedCheckpoints({}, 0, already=False)  # no runner ran here
        _log.create(connection, checkfirst=True)
        numbered = connection.execute(
            sa.select(_log.c.log).where(_log.c.id == _ONLY).with_for_update()
        ).scalar_one_or_none()
        if numbered == positions.destination:
            return CarriedCheckpoints({}, 0, already=True)
        if numbered is not None and numbered != positions.source:
            raise ProjectionError(
                f"the checkpoints here are numbered by the log at {numbered}, not by the one "
                f"the move copied ({positions.source}): they follow another log; nothing "
                "was carried"
            )
        carried = _carry(connection, positions)
        moved = _carry_parked(connection, positions)
        _record(connection, numbered is not None, positions.destination)
    return CarriedCheckpoints(carried, moved, already=False)


def _carry(connection: sa.Connection, positions: PositionMap) -> dict[str, tuple[int, int]]:
    rows = connection.execute(
        sa.select(
            checkpoints.c.name,
            checkpoints.c.position,
            checkpoints.c.owner,
            checkpoints.c.lease_until,
        )
        .order_by(checkpoints.c.name)
        .with_for_update()
    ).all()
    now = clock.read_now(connection)
    held = [row.name for row in rows if row.owner is not None and (row.lease_until or 0.0) > now]
    if held:
        raise ProjectionError(
            f"{', '.join(held)} {'is' if len(held) == 1 else 'are'} being run (a runner holds "
            "the lease): stop the runners of the moved tenant first; nothing was carried"
        )
    ahead = [f"{row.name} at {row.position}" for row in rows if row.position > positions.until]
    if ahead:
        raise ProjectionError(
            f"{', '.join(ahead)}: past the copy, which went up to position {positions.until} "
            "of the old log (the tenant was served after the move began): stop what writes "
            "to it, move it again, then carry; nothing was carried"
        )
    carried = {}
    for row in rows:
        new = positions.new_position(row.position)
        carried[row.name] = (row.position, new)
        if new != row.position:
            connection.execute(
                sa.update(checkpoints)
                .where(checkpoints.c.name == row.name)
                .values(position=new, updated_at=time.time())
            )
    return carried


def _carry_parked(connection: sa.Connection, positions: PositionMap) -> int:
    """Each parked event at its event's new position: taken out and put back, so that no
    new position meets an old one of the same projection on the way."""
    if not sa.inspect(connection).has_table(parked.name):
        return 0
    rows = [row._asdict() for row in connection.execute(sa.select(parked)).all()]
    if not rows:
        return 0
    connection.execute(sa.delete(parked))
    for row in rows:
        row["position"] = positions.new_position(row["position"])
    connection.execute(sa.insert(parked), rows)
    return len(rows)


def _record(connection: sa.Connection, recorded: bool, log: str) -> None:
    values = {"log": log, "carried_at": time.time()}
    if recorded:
        connection.execute(sa.update(_log).where(_log.c.id == _ONLY).values(**values))
    else:
        connection.execute(sa.insert(_log).values(id=_ONLY, **values))
