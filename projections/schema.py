"""The tables projections keep beside their read models, in the read-model database.

`eventcraft_projections` holds one row per projection: its checkpoint, the
generation of tables that serves queries, and its lease. Every batch locks
that row, checks that the checkpoint is where the batch began, writes the
read model and moves the checkpoint, all in one transaction: that is what
makes each event apply exactly once, whatever else runs.

`eventcraft_parked` is the error store: events a handler failed on. A
subscriber's event being retried keeps its row, claimed, until the handler
has returned (`settling.py`).
"""

from __future__ import annotations

import sqlalchemy as sa

CHECKPOINTS = "eventcraft_projections"
PARKED = "eventcraft_parked"
"""The error store's table: the events a projection's handler failed on, parked to retry.

Example::

    import sqlalchemy as sa
    from eventcraft.eventstore import EventStore, NewEvent
    from eventcraft.projections import PARKED_TABLE, ErrorPolicy, ProjectionRunner, Subscription

    def refuse(event):
        raise ValueError("the mail server refused it")

    mailer = Subscription("mailer", refuse, on_error=ErrorPolicy(attempts=1, then="skip"))
    store = EventStore.open("sqlite:///shop.db")
    store.append("order-1", [NewEvent("OrderPaid", {"cents": 900})])
    with ProjectionRunner(store, [mailer]) as runner:
        runner.catch_up()
        with runner.database.reading() as connection:  # e.g. for a report of your own
            query = f"SELECT projection, position, error FROM {PARKED_TABLE}"
            rows = connection.execute(sa.text(query)).all()
    assert rows == [("mailer", 1, "ValueError: the mail server refused it")]
    assert PARKED_TABLE == "eventcraft_parked"
    store.close()
"""

metadata = sa.MetaData()

checkpoints = sa.Table(
    CHECKPOINTS,
    metadata,
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("position", sa.BigInteger, nullable=False),
    sa.Column("generation", sa.Integer, nullable=False),
    # The next generation a rebuild may fill; only ever grows.
    sa.Column("next_generation", sa.Integer, nullable=False),
    sa.Column("owner", sa.Text, nullable=True),
    # Seconds since the epoch, by the owner's clock.
    sa.Column("lease_until", sa.Float, nullable=True),
    sa.Column("updated_at", sa.Float, nullable=False),
)

parked = sa.Table(
    PARKED,
    metadata,
    sa.Column("projection", sa.Text, primary_key=True),
    sa.Column("position", sa.BigInteger, primary_key=True),
    sa.Column("event_id", sa.Text, nullable=False),
    sa.Column("stream_id", sa.Text, nullable=False),
    sa.Column("version", sa.BigInteger, nullable=False),
    sa.Column("type", sa.Text, nullable=False),
    sa.Column("error", sa.Text, nullable=False),
    sa.Column("traceback", sa.Text, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("parked_at", sa.Float, nullable=False),
    # The runner retrying the event now, and when its claim lapses unless renewed
    # (seconds since the epoch, by its clock); both null when nobody is.
    sa.Column("claimed_by", sa.Text, nullable=True),
    sa.Column("claimed_until", sa.Float, nullable=True),
)

_ADDED_TO_PARKED = ("claimed_by", "claimed_until")
"""Columns a store made by an earlier release lacks: `create` adds them."""


def create(connection: sa.Connection, tables: sa.MetaData = metadata) -> None:
    """Create the tables of `tables` (the projections' own by default) that are missing,
    safely from several processes at once: on PostgreSQL two that both find a table
    missing would both create it, and one fail on the catalogue's unique index."""
    if connection.dialect.name == "postgresql":
        connection.execute(
            sa.text(
                "SELECT pg_advisory_xact_lock("
                "hashtext('eventcraft-projections:' || current_schema()))"
            )
        )
    tables.create_all(connection, checkfirst=True)
    if tables is metadata:
        _upgrade_parked(connection)


def _upgrade_parked(connection: sa.Connection) -> None:
    """Add the columns an error store made by an earlier release lacks; its rows keep
    their values, unclaimed. Under the lock above (PostgreSQL) or the write lock every
    transaction takes (SQLite), so two processes never both add one."""
    present = {column["name"] for column in sa.inspect(connection).get_columns(PARKED)}
    for name in _ADDED_TO_PARKED:
        if name not in present:
            kind = parked.c[name].type.compile(dialect=connection.dialect)
            connection.execute(sa.text(f"ALTER TABLE {PARKED} ADD COLUMN {name} {kind}"))
