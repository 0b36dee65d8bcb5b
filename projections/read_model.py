"""What a handler writes through: one transaction, the tables of one generation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from .errors import DefinitionError


class ReadModel:
    """The read model's tables inside the batch's transaction.

    A projection declares its tables once; the runner keeps them in
    generations (so a rebuild can fill new ones while the old ones serve)
    and hands each handler the generation it writes to. Write through
    `read_model[table]`, never through the declared table itself.

    Example::

        import sqlalchemy as sa
        from eventcraft.eventstore import EventStore, NewEvent, RecordedEvent
        from eventcraft.projections import Projection, ProjectionRunner, ReadModel

        accounts_table = sa.Table(
            "accounts", sa.MetaData(),
            sa.Column("id", sa.Text, primary_key=True),
            sa.Column("balance", sa.BigInteger, nullable=False),
        )
        accounts_view = Projection("accounts", tables=[accounts_table])

        @accounts_view.on("AccountOpened")
        def opened(read_model: ReadModel, event: RecordedEvent) -> None:
            accounts = read_model[accounts_table]  # this generation's table
            read_model.execute(sa.insert(accounts).values(id=event.stream_id, balance=0))

        store = EventStore.open("sqlite:///bank.db")
        store.append("account-1", [NewEvent("AccountOpened", {})])
        with ProjectionRunner(store, [accounts_view]) as runner:
            runner.catch_up()
            with runner.database.reading() as connection:
                assert connection.execute(sa.select(accounts_table)).all() == [("account-1", 0)]
        store.close()
    """

    def __init__(self, connection: sa.Connection, tables: Mapping[str, sa.Table]) -> None:
        self.connection = connection
        """The transaction's connection; it commits with the checkpoint."""
        self._tables = tables

    def __getitem__(self, table: sa.Table | str) -> sa.Table:
        key = table if isinstance(table, str) else table.fullname
        try:
            return self._tables[key]
        except KeyError:
            declared = ", ".join(sorted(self._tables)) or "none"
            raise DefinitionError(
                f"table {key!r} is not one of this projection's tables (declared: {declared})"
            ) from None

    def execute(self, statement: sa.Executable, parameters: Any = None) -> sa.CursorResult[Any]:
        return self.connection.execute(statement, parameters)
