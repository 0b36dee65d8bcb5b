"""Blue/green hand-over, shared by every way of rebuilding: in process or in Spark.

A rebuild fills a new generation's tables while the old one serves, then
`swap_in` makes it serve in one transaction that holds the checkpoint
row: no live projector moves meanwhile, so the rebuild first applies what
the live one had reached beyond the replay, then points the views at the
new tables, sets the checkpoint and drops the old tables. The live
projector carries on from the new checkpoint in the new tables, without
missing or repeating an event.

A rebuild fails on the first event a handler fails on, whatever the
error policy, so a swap has applied every event up to its checkpoint:
the events parked up to there are settled with it, and only those
beyond it stay parked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from eventcraft.eventstore import EventStore

from . import checkpoint, generations, parking
from .database import Database
from .definition import Definition
from .projector import read_batch
from .read_model import ReadModel


@contextmanager
def new_generation(
    database: Database, definition: Definition
) -> Iterator[tuple[int, dict[str, sa.Table]]]:
    """Claim and create the next generation's tables; drop them if the body fails.

    The old generation never stops serving, so a failed rebuild leaves the
    read model as it was.
    """
    with database.transaction() as connection:
        generation = checkpoint.claim_generation(connection, definition.name)
        generations.create(connection, definition, generation)
    try:
        yield generation, generations.tables_of(definition, generation)
    except BaseException:
        with database.transaction() as connection:
            generations.drop(connection, definition, generation)
        raise


def swap_in(
    store: EventStore,
    database: Database,
    definition: Definition,
    generation: int,
    position: int,
    *,
    batch_size: int,
    advance: Callable[[int], None] = lambda position: None,
) -> tuple[int, int]:
    """Serve `generation`, filled up to `position`; (the checkpoint set, events applied)."""
    name, applied = definition.name, 0
    tables = generations.tables_of(definition, generation)
    with database.transaction() as connection:
        row = checkpoint.read(connection, name, lock=True)
        assert row is not None, "the runner creates the row before any rebuild"
        read_model = ReadModel(connection, tables)
        while position < row.position:
            events, upto = read_batch(store, definition, position, batch_size)
            definition.apply(read_model, events)
            position, applied = upto, applied + len(events)
            advance(position)
        checkpoint.serve(connection, name, generation, position)
        parking.settle(connection, name, 0, position)
        generations.serve(connection, definition, generation)
        if row.generation != generation:
            generations.drop(connection, definition, row.generation)
    return position, applied
