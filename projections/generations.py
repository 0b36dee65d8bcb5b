"""Blue/green tables: each projection's tables exist in numbered generations.

Generation g of a declared table `t` is the real table `t__g<g>`, and `t`
itself is a view of the generation that serves. Queries name `t` and never
notice a rebuild: it fills generation g+1 while g serves, then one
transaction points the views at g+1 (with the checkpoint) and drops g.
"""

from __future__ import annotations

import sqlalchemy as sa

from .definition import Definition


def physical_name(table: sa.Table, generation: int) -> str:
    return f"{table.name}__g{generation}"


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
                    index.name = sa.sql.elements.conv(f"{index.name}__g{generation}")
            for constraint in copy.constraints:
                if isinstance(constraint.name, str) and constraint.name:
                    constraint.name = sa.sql.elements.conv(f"{constraint.name}__g{generation}")
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
    """Point each declared table's view at `generation`."""
    quote = connection.dialect.identifier_preparer.format_table
    physical = tables_of(definition, generation)
    for table in definition.tables:
        connection.exec_driver_sql(f"DROP VIEW IF EXISTS {quote(table)}")
        connection.exec_driver_sql(
            f"CREATE VIEW {quote(table)} AS SELECT * FROM {quote(physical[table.fullname])}"
        )
