"""A read model as a fold per key: one row per key, rebuilt by pure functions.

The fold is three pure functions: the key an event belongs to, the initial
state of a key, and `apply(state, event) -> state`. A state is the key's
row, as a dict of column values. Nothing else is needed to run it, so the
incremental runner, the in-process rebuild and a Spark replay all run the
same definition: group events by key, order them by position, fold.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from eventcraft.eventstore import Query, RecordedEvent

from .definition import Definition, checked_names, note_failure
from .errors import DefinitionError
from .policy import ErrorPolicy
from .read_model import ReadModel
from .typed_event import EventDecoder, TypedEvent

State = dict[str, Any]
"""A key's row: column name to value.

Example::

    from eventcraft.eventstore import EventStore, NewEvent, RecordedEvent
    from eventcraft.projections import State

    def new_cart(cart_id: str) -> State:  # a Fold's `initial`: a key's first row
        return {"cart_id": cart_id, "items": 0}

    def apply(cart: State, event: RecordedEvent) -> State | None:  # a Fold's `apply`
        if event.type == "CartEmptied":
            return None  # the key's row is deleted
        return {**cart, "items": cart["items"] + 1}

    with EventStore.open("memory://") as store:
        store.append("cart-7", [NewEvent("ItemAdded", {}), NewEvent("CartEmptied", {})])
        added, emptied = store.read_stream("cart-7")
    assert apply(new_cart("7"), added) == {"cart_id": "7", "items": 1}
    assert apply({"cart_id": "7", "items": 1}, emptied) is None
"""

_CHUNK = 500  # keys per IN list, well under every database's parameter limit
_INT64 = 2**63


def normal_key(name: str, key: float) -> float:
    """A float key as every runner keys it: integral floats as the int they equal.

    Python holds `1 == 1.0` and `0.0 == -0.0`, so a dict of states keys them
    as one; a Spark replay groups keys by their text, which would not. Both
    runners key by this form, so a key means the same everywhere (floats past
    64-bit integers stay floats: no integer column could hold their int).
    NaN is never equal to itself, so it cannot be a key; nor can infinity.
    """
    if not math.isfinite(key):
        raise DefinitionError(f"{name}: a key is a finite number, not {key!r}")
    if key.is_integer() and -_INT64 <= key < _INT64:
        return int(key)
    return key


class Fold(Definition):
    """One row per key of `table`, evolved by `apply` for each of the key's events.

    `query` (an eventstore `Query` of types and tags) narrows the events it
    reads, as `types` and `categories` do. `apply` returning None deletes the
    key's row; anything else but a row (a dict) is a `DefinitionError`, a
    failure of that event like an exception from `apply`. The functions must
    be pure: they see only their arguments, and return new states.

    With `registry` (the application's `EventRegistry`), `key` and `apply`
    receive each event as a `TypedEvent`: its `data` the typed event, upcast
    to today's schema as a repository's load decodes it. An event the registry
    cannot decode (give `types=sorted(registry.types)` to read only the ones
    it knows) fails as `apply` failing would, under `on_error`, in every
    runner, a Spark replay's included.

    Example::

        import sqlalchemy as sa
        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections import Fold, ProjectionRunner

        balances_table = sa.Table(
            "balances", sa.MetaData(),
            sa.Column("account_id", sa.Text, primary_key=True),
            sa.Column("balance", sa.BigInteger, nullable=False),
        )
        signs = {"Deposited": 1, "Withdrawn": -1}
        balances = Fold(
            "balances",
            table=balances_table,  # primary key: account_id
            types=["Deposited", "Withdrawn"],
            key=lambda event: event.stream_id,  # None: not this fold's event
            initial=lambda key: {"account_id": key, "balance": 0},
            apply=lambda state, event: {
                **state, "balance": state["balance"] + signs[event.type] * event.data["cents"]
            },
        )
        store = EventStore.open("sqlite:///bank.db")
        store.append("account-1", [NewEvent("Deposited", {"cents": 900}),
                                   NewEvent("Withdrawn", {"cents": 250})])
        with ProjectionRunner(store, [balances]) as runner:
            runner.catch_up()
            with runner.database.reading() as connection:
                assert connection.execute(sa.select(balances_table)).all() == [("account-1", 650)]
        store.close()
    """

    def __init__(
        self,
        name: str,
        *,
        table: sa.Table,
        key: Callable[[RecordedEvent], Hashable | None]
        | Callable[[TypedEvent[Any]], Hashable | None],
        initial: Callable[[Any], State],
        apply: Callable[[State, RecordedEvent], State | None]
        | Callable[[State, TypedEvent[Any]], State | None],
        types: Sequence[str] | str | None = None,
        categories: Sequence[str] | str | None = None,
        query: Query | None = None,
        on_error: ErrorPolicy | None = None,
        registry: EventDecoder | None = None,
    ) -> None:
        super().__init__(
            name,
            tables=[table],
            categories=categories,
            query=query,
            on_error=on_error,
            registry=registry,
        )
        for what, function in (("key", key), ("initial", initial), ("apply", apply)):
            if not callable(function):
                raise DefinitionError(f"{name}: {what} must be callable, not {function!r}")
        primary_key = list(table.primary_key.columns)
        if len(primary_key) != 1:
            raise DefinitionError(
                f"{name}: a fold's table needs a primary key of one column (the key); "
                f"{table.name!r} has {len(primary_key)}"
            )
        self.table = table
        self.key_column = primary_key[0].name
        self.key: Callable[[Any], Hashable | None] = key
        self.initial = initial
        self.evolve: Callable[[State, Any], State | None] = apply
        self._types = checked_names(name, "types", types)

    @property
    def types(self) -> tuple[str, ...] | None:
        return self._types

    def fold(self, states: dict[Any, State | None], events: Iterable[RecordedEvent]) -> None:
        """Fold `events` into `states` (key -> row, None once deleted), in order."""
        self._fold(states, self._delivered(events))

    def _delivered(self, events: Iterable[RecordedEvent]) -> Iterable[tuple[RecordedEvent, Any]]:
        """Each event with what `key` and `apply` receive: itself, or typed by the registry
        (decoded once, for both)."""
        decoder = self.registry
        if decoder is None:
            return ((event, event) for event in events)
        pairs = []
        for event in events:
            try:
                pairs.append((event, TypedEvent.decoded(decoder, event)))
            except Exception as error:
                note_failure(error, self.name, event)
                raise
        return pairs

    def _fold(
        self, states: dict[Any, State | None], pairs: Iterable[tuple[RecordedEvent, Any]]
    ) -> None:
        key_of, initial, evolve = self.key, self.initial, self.evolve
        for event, delivered in pairs:
            try:
                key = key_of(delivered)
                if key is None:
                    continue
                if type(key) is float:
                    key = normal_key(self.name, key)
                state = states.get(key)
                if state is None:
                    state = self._row("initial", initial(key), event)
                evolved = evolve(state, delivered)
                # The exact type first: the check costs a rebuild next to nothing.
                if evolved is not None and type(evolved) is not dict:
                    evolved = self._row("apply", evolved, event)
                states[key] = evolved
            except Exception as error:
                note_failure(error, self.name, event)
                raise

    def _row(self, function: str, row: Any, event: RecordedEvent) -> State:
        if type(row) is dict:
            return row
        if not isinstance(row, Mapping):
            or_none = "" if function == "initial" else " or None"
            raise DefinitionError(
                f"{self.name}: {function} must return a row (a dict){or_none}, "
                f"not {row!r} ({type(row).__name__}), "
                f"for the event at position {event.position} ({event.type})"
            )
        return dict(row)

    def rows(self, states: dict[Any, State | None]) -> list[State]:
        """The rows to store for `states`, each carrying its key."""
        column = self.key_column
        return [{**state, column: key} for key, state in states.items() if state is not None]

    def apply(self, read_model: ReadModel, events: Sequence[RecordedEvent]) -> None:
        table = read_model[self.table]
        key_column = table.c[self.key_column]
        pairs = list(self._delivered(events))
        keys = list(dict.fromkeys(k for k in self._keys(pairs) if k is not None))
        states: dict[Any, State | None] = {}
        for chunk in _chunks(keys):
            found = read_model.execute(sa.select(table).where(key_column.in_(chunk)))
            states.update((row[self.key_column], dict(row)) for row in found.mappings())
        self._fold(states, pairs)
        for chunk in _chunks(keys):
            read_model.execute(sa.delete(table).where(key_column.in_(chunk)))
        rows = self.rows(states)
        if rows:
            read_model.execute(sa.insert(table), rows)

    def _keys(self, pairs: Sequence[tuple[RecordedEvent, Any]]) -> Iterator[Hashable | None]:
        key_of = self.key
        for event, delivered in pairs:
            try:
                key = key_of(delivered)
                yield normal_key(self.name, key) if type(key) is float else key
            except Exception as error:
                note_failure(error, self.name, event)
                raise


def _chunks(keys: list[Any]) -> Iterable[list[Any]]:
    for start in range(0, len(keys), _CHUNK):
        yield keys[start : start + _CHUNK]
