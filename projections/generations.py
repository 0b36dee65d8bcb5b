"""Blue/green tables: each projection's tables exist in numbered generations.

Generation g of a declared table `t` is the real table `t__g<g>`, and `t`
itself is a view of the generation that serves. Queries name `t` and never
notice a rebuild: it fills generation g+1 while g serves, then one
transaction points the views at g+1 (with the checkpoint) and drops g.
"""

from __future__ import annotations

import sqlalchemy as sa

from . import identifiers
from .definition import Definition
from .errors import TableConflict


def physical_name(table: sa.Table, generation: int) -> str:
    return identifiers.of_generation(table.name, generation)


def tables_of(definition: Definition, generation: int) -> dict[str, sa.Table]:
    """Declared table's full name -> its table in `generation`."""
    cached = definition.generation_tables.get(generation)
    if cached is None:
        metadata = sa.MetaData()
        cached = {}
        for table in definition.tables:
            copy = table.to_metadata(metadata, name=physical_name(table, generation))
            # Explicit names must differ between generations that coexist.
            for index in copy.indexes:
                if isinstance(index.name, str) and index.name:
                    index.name = sa.sql.elements.conv(
                        identifiers.of_generation(index.name, generation)
                    )
            for constraint in copy.constraints:
                if isinstance(constraint.name, str) and constraint.name:
                    constraint.name = sa.sql.elements.conv(
                        identifiers.of_generation(constraint.name, generation)
                    )
            cached[table.fullname] = copy
        definition.generation_tables[generation] = cached
    return cached


def create(connection: sa.Connection, definition: Definition, generation: int) -> None:
    """Create `generation`'s tables empty, dropping any a crashed rebuild left."""
    drop(connection, definition, generation)
    for table in tables_of(definition, generation).values():
        table.create(connection)


def drop(connection: sa.Connection, definition: Definition, generation: int) -> None:
    for table in tables_of(definition, generation).values():
        table.drop(connection, checkfirst=True)


def serve(connection: sa.Connection, definition: Definition, generation: int) -> None:
    """Point each declared table's view at `generation`.

    A table (not a view) of a declared name is not the runner's to replace:
    it is refused, and the transaction's rollback leaves it as it was.
    """
    quote = connection.dialect.identifier_preparer.format_table
    physical = tables_of(definition, generation)
    inspector = sa.inspect(connection)
    for table in definition.tables:
        if table.name in inspector.get_table_names(schema=table.schema):
            raise TableConflict(
                f"{definition.name}: a table {table.fullname!r} exists and is not one the runner "
                f"made (it serves a declared table as a view over its own, "
                f"{physical_name(table, generation)!r} and later generations): rename the "
                f"declared table, or move yours out of the way"
            )
        connection.exec_driver_sql(f"DROP VIEW IF EXISTS {quote(table)}")
        connection.exec_driver_sql(
            f"CREATE VIEW {quote(table)} AS SELECT * FROM {quote(physical[table.fullname])}"
        )
