"""What relays say about themselves, for other processes: the command line, a console.

A relay's checkpoint is in the projections' table; whether it is publishing or
paused by a broker outage is known only to its process, so it writes that here
when it changes (started, paused, resumed, stopped). A row whose relay died
without saying so still reads "running": `updated_at` and the checkpoint's
lease (its owner) tell how current it is.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import sqlalchemy as sa

STATES = "eventcraft_relays"

metadata = sa.MetaData()

table = sa.Table(
    STATES,
    metadata,
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("broker", sa.Text, nullable=False),
    sa.Column("state", sa.Text, nullable=False),
    sa.Column("paused_since", sa.Float, nullable=True),
    sa.Column("last_error", sa.Text, nullable=True),
    sa.Column("outages", sa.Integer, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)


@dataclass(frozen=True)
class RelayState:
    name: str
    broker: str
    """The broker as the relay shows it: kind and address, no password."""
    state: str
    """"running", "paused" or "stopped", as the relay last said."""
    paused_since: float | None
    last_error: str | None
    outages: int
    """Outages the relay's process has met since it started."""
    updated_at: float


def create(connection: sa.Connection) -> None:
    if connection.dialect.name == "postgresql":
        connection.execute(
            sa.text(
                "SELECT pg_advisory_xact_lock(hashtext('eventcraft-relays:' || current_schema()))"
            )
        )
    metadata.create_all(connection, checkfirst=True)


def write(connection: sa.Connection, state: RelayState) -> None:
    values = {
        "broker": state.broker,
        "state": state.state,
        "paused_since": state.paused_since,
        "last_error": state.last_error,
        "outages": state.outages,
        "updated_at": time.time(),
    }
    done = connection.execute(sa.update(table).where(table.c.name == state.name).values(values))
    if done.rowcount == 0:
        connection.execute(sa.insert(table).values(name=state.name, **values))


def listed(connection: sa.Connection) -> list[RelayState]:
    if not sa.inspect(connection).has_table(STATES):
        return []
    rows = connection.execute(sa.select(table).order_by(table.c.name))
    return [RelayState(*row) for row in rows]
