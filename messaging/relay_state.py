"""What relays say about themselves, for other processes: the command line, a console.

A relay's checkpoint is in the projections' table; whether it is publishing or
paused by a broker outage is known only to its process, so it writes that here
when it changes (running, paused, resumed, stopped), however it is run, and
never once per batch (`relay.py` says when). A row whose relay died without
saying so still reads "running": `updated_at` and the checkpoint's lease (its
owner) tell how current it is.

It writes its selection too (`relay_selection`), so that they count its
lag as it does. A table an earlier release made lacks that column: a
relay's open adds it, and until then the row is read without it.
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
    # JSON text (`relay_selection.recorded`); null in rows made before the column was.
    sa.Column("selection", sa.Text, nullable=True),
)

_ADDED = ("selection",)
"""Columns a table made by an earlier release lacks: `create` adds them."""


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
    selection: str | None = None
    """What the relay publishes (`relay_selection.recorded`); None if it never said."""


def create(connection: sa.Connection) -> None:
    if connection.dialect.name == "postgresql":
        connection.execute(
            sa.text(
                "SELECT pg_advisory_xact_lock(hashtext('eventcraft-relays:' || current_schema()))"
            )
        )
    metadata.create_all(connection, checkfirst=True)
    # Under the lock above (PostgreSQL) or the write lock every transaction takes
    # (SQLite): two processes never both add a column.
    for name in _missing(connection):
        kind = table.c[name].type.compile(dialect=connection.dialect)
        connection.execute(sa.text(f"ALTER TABLE {STATES} ADD COLUMN {name} {kind}"))


def write(connection: sa.Connection, state: RelayState) -> None:
    values = {
        "broker": state.broker,
        "state": state.state,
        "paused_since": state.paused_since,
        "last_error": state.last_error,
        "outages": state.outages,
        "updated_at": time.time(),
        "selection": state.selection,
    }
    done = connection.execute(sa.update(table).where(table.c.name == state.name).values(values))
    if done.rowcount == 0:
        connection.execute(sa.insert(table).values(name=state.name, **values))


def listed(connection: sa.Connection) -> list[RelayState]:
    """Every relay's row, by name; read as it is, whichever release made the table."""
    if not sa.inspect(connection).has_table(STATES):
        return []
    missing = _missing(connection)
    columns = [c for c in table.columns if c.name not in missing]
    rows = connection.execute(sa.select(*columns).order_by(table.c.name)).mappings()
    return [RelayState(**row) for row in rows]


def _missing(connection: sa.Connection) -> list[str]:
    present = {column["name"] for column in sa.inspect(connection).get_columns(STATES)}
    return [name for name in _ADDED if name not in present]
