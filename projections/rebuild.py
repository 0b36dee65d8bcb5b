"""Rebuild a read model from position 0 into new tables, then swap them in.

The old generation keeps serving queries, and the live projector keeps it
current, while the new one fills; `swap.py` hands over without missing or
repeating an event.

A fold is replayed in memory (one dict of rows) and written once; handler
projections are replayed in transactions of `batch_size` events. A failing
handler fails the rebuild: nothing is swapped, the old tables keep serving.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from eventcraft.eventstore import EventStore, RecordedEvent
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from .database import Database
from .definition import Definition
from .errors import DefinitionError
from .fold import Fold, State
from .projector import read_batch
from .read_model import ReadModel
from .subscription import Subscription
from .swap import new_generation, swap_in

_INSERT_CHUNK = 5000


@dataclass(frozen=True)
class RebuildReport:
    """What a rebuild did: the generation it built and swapped in, and up to where.

    Example::

        import sqlalchemy as sa
        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections import Fold, ProjectionRunner, RebuildReport, StreamKey

        totals = sa.Table("totals", sa.MetaData(), sa.Column("order_id", sa.Text, primary_key=True),
                          sa.Column("cents", sa.BigInteger, nullable=False))
        order_totals = Fold("order-totals", table=totals, key=StreamKey("order-"),
                            initial=lambda key: {"order_id": key, "cents": 0},
                            apply=lambda row, event: {**row, "cents": event.data["cents"]})
        store = EventStore.open("sqlite:///shop.db")
        store.append("order-1", [NewEvent("OrderPlaced", {"cents": 900})])
        with ProjectionRunner(store, [order_totals]) as runner:
            runner.catch_up()
            report: RebuildReport = runner.rebuild("order-totals")  # into totals__g2, then swapped
            assert (report.generation, report.position, report.events) == (2, 1, 1)
        store.close()
    """

    name: str
    generation: int
    """The generation now serving."""
    position: int
    """The checkpoint set by the swap."""
    events: int
    """Events the definition read."""
    seconds: float


def rebuild(
    store: EventStore,
    database: Database,
    definition: Definition,
    *,
    batch_size: int = 10_000,
    progress: bool | Callable[[int, int], None] = False,
) -> RebuildReport:
    if isinstance(definition, Subscription):
        raise DefinitionError(f"{definition.name}: a subscription has no read model to rebuild")
    started = time.perf_counter()
    name = definition.name
    with new_generation(database, definition) as (generation, tables):
        # Replay up to the head as it is now: writers may outrun any replay, and
        # what they add meanwhile is the live projector's to apply.
        target = store.high_water_mark()
        with _bar(progress, name, target) as advance:
            if isinstance(definition, Fold):
                position, count = _fold_in_memory(
                    store, database, definition, tables, target, batch_size, advance
                )
            else:
                position, count = _replay(
                    store, database, definition, tables, target, batch_size, advance
                )
            position, caught_up = swap_in(
                store,
                database,
                definition,
                generation,
                position,
                batch_size=batch_size,
                advance=advance,
            )
    return RebuildReport(
        name, generation, position, count + caught_up, time.perf_counter() - started
    )


def _replay(
    store: EventStore,
    database: Database,
    definition: Definition,
    tables: dict[str, sa.Table],
    target: int,
    batch_size: int,
    advance: Callable[[int], None],
) -> tuple[int, int]:
    position = count = 0
    for events, upto in _read_ahead(store, definition, target, batch_size):
        with database.transaction() as connection:
            definition.apply(ReadModel(connection, tables), events)
        position, count = upto, count + len(events)
        advance(position)
    return position, count


def _fold_in_memory(
    store: EventStore,
    database: Database,
    fold: Fold,
    tables: dict[str, sa.Table],
    target: int,
    batch_size: int,
    advance: Callable[[int], None],
) -> tuple[int, int]:
    states: dict[Any, State | None] = {}
    position = count = 0
    for events, upto in _read_ahead(store, fold, target, batch_size):
        fold.fold(states, events)
        position, count = upto, count + len(events)
        advance(position)
    rows = fold.rows(states)
    table = tables[fold.table.fullname]
    with database.transaction() as connection:
        for start in range(0, len(rows), _INSERT_CHUNK):
            connection.execute(sa.insert(table), rows[start : start + _INSERT_CHUNK])
    return position, count


def _read_ahead(
    store: EventStore, definition: Definition, target: int, batch_size: int
) -> Iterator[tuple[list[RecordedEvent], int]]:
    """The batches up to `target`, each read while the one before is folded.

    The driver waits on the network without the GIL, so the database sends
    the next batch while Python folds this one.
    """
    batches: queue.Queue[tuple[list[RecordedEvent], int] | BaseException | None] = queue.Queue(2)
    done = threading.Event()

    def hand_over(item: tuple[list[RecordedEvent], int] | BaseException | None) -> None:
        while not done.is_set():
            try:
                batches.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def read() -> None:
        position = 0
        try:
            while position < target and not done.is_set():
                events, position = read_batch(store, definition, position, batch_size)
                hand_over((events, position))
            hand_over(None)
        except BaseException as error:
            hand_over(error)

    reader = threading.Thread(target=read, name=f"rebuild:{definition.name}", daemon=True)
    reader.start()
    try:
        while (item := batches.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        done.set()
        reader.join()


@contextmanager
def _bar(
    shown: bool | Callable[[int, int], None], name: str, total: int
) -> Iterator[Callable[[int], None]]:
    if callable(shown):
        # A caller drawing its own progress (the web console) is told position and target.
        told = shown
        yield lambda position: told(min(position, total), total)
        return
    if not shown:
        yield lambda position: None
        return
    columns = (
        TextColumn(f"rebuilding {name}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, transient=False) as bar:
        task = bar.add_task(name, total=max(total, 1))

        def advance(position: int) -> None:
            bar.update(task, completed=min(position, total), total=max(total, position, 1))

        yield advance
