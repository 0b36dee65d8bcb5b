"""Folds declared as reducers per column, so Spark can fold them in the JVM.

A `ReducerFold` says what each column of a key's row is (`Sum` of a field,
`Count` of events, `Min`, `Max`, `First`, `Last`, or `Set` by an event
type) instead of giving an `apply`. In process it is an ordinary `Fold`
whose `apply` runs the reducers, so the incremental runner and the
in-process rebuild take it as they are; a Spark replay runs the same
declaration as `groupBy(key).agg(...)` of SQL expressions, with no Python
worker folding events (`spark/aggregate.py`).

What a field means, in every runner: a path of object keys into the
event's JSON data (`"amount"`, `"address.city"`), or the event's
`POSITION` or `RECORDED_AT`. Its value counts only when it is of the
column's kind: a JSON integer (within 64 bits) for an integer column, any
JSON number for a float column, a string for a text column, true or false
for a boolean one. Anything else, null or a missing field is *absent*:
`Sum`, `Count`, `Min`, `Max`, `First` and `Last` pass over it; `Set` sets
the column to null.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC
from typing import Any

import sqlalchemy as sa
from eventcraft.eventstore import RecordedEvent

from .definition import checked_names
from .errors import DefinitionError
from .fold import Fold, State
from .policy import ErrorPolicy
from .typed_event import EventDecoder

_SEGMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INT64 = 2**63

INTEGER, FLOAT, TEXT, BOOLEAN, TIME = "integer", "float", "text", "boolean", "time"
"""The kinds of value a column holds, from its SQL type."""


@dataclass(frozen=True)
class Meta:
    """One of the event's own fields rather than its data's."""

    name: str


POSITION = Meta("position")
"""A reducer's field that is the event's position in the global log.

Example::

    import sqlalchemy as sa
    from eventcraft.eventstore import EventStore, NewEvent
    from eventcraft.projections import ProjectionRunner, ReducerFold, StreamKey
    from eventcraft.projections.reducers import POSITION, Max

    accounts = sa.Table(
        "accounts", sa.MetaData(),
        sa.Column("account", sa.Text, primary_key=True),
        sa.Column("changed_at", sa.BigInteger),  # the position of its last event
    )
    fold = ReducerFold(
        "accounts", table=accounts, key=StreamKey("account-"),
        columns={"changed_at": Max(POSITION)},
    )
    with EventStore.open("memory://") as store, ProjectionRunner(store, [fold]) as runner:
        store.append("account-1", [NewEvent("Opened", {})])
        written = store.append("account-2", [NewEvent("Opened", {}), NewEvent("Deposited", {})])
        runner.catch_up()
        with runner.database.reading() as connection:
            rows = connection.execute(sa.select(accounts).order_by("account")).all()
        assert rows == [("1", 1), ("2", written.positions[-1])]
"""

RECORDED_AT = Meta("recorded_at")
"""A reducer's field that is the time the event was recorded.

Example::

    from datetime import UTC

    import sqlalchemy as sa
    from eventcraft.eventstore import EventStore, NewEvent
    from eventcraft.projections import ProjectionRunner, ReducerFold, StreamKey
    from eventcraft.projections.reducers import RECORDED_AT, First, Last

    users = sa.Table(
        "users", sa.MetaData(),
        sa.Column("user", sa.Text, primary_key=True),
        sa.Column("first_seen", sa.DateTime(timezone=True)),
        sa.Column("last_seen", sa.DateTime(timezone=True)),
    )
    fold = ReducerFold(
        "users", table=users, key=StreamKey("user-"),
        columns={"first_seen": First(RECORDED_AT), "last_seen": Last(RECORDED_AT)},
    )
    with EventStore.open("memory://") as store, ProjectionRunner(store, [fold]) as runner:
        store.append("user-ann", [NewEvent("LoggedIn", {})])
        store.append("user-ann", [NewEvent("LoggedIn", {})])
        first, last = store.read_stream("user-ann")
        runner.catch_up()
        with runner.database.reading() as connection:
            row = connection.execute(sa.select(users)).one()
        # SQLite keeps no time zone: it gives the UTC time back naive.
        assert row.first_seen.replace(tzinfo=UTC) == first.recorded_at
        assert row.last_seen.replace(tzinfo=UTC) == last.recorded_at
"""


@dataclass(frozen=True, init=False)
class Reducer:
    """A column's value, folded from one field of the key's events (of `types`, if given).

    Example::

        from eventcraft.projections.reducers import Count, Max, Reducer, Sum

        columns: dict[str, Reducer] = {  # what a ReducerFold's `columns` maps each column to
            "deposited": Sum("cents", types="Deposited"),
            "deposits": Count(types="Deposited"),
            "largest": Max("cents", types="Deposited"),
        }
        assert repr(columns["deposited"]) == "Sum('cents', types=['Deposited'])"
        assert columns["deposited"].step(500, 250) == 750  # the column after one more event
        assert columns["largest"].step(500, None) == 500  # an event without the field
    """

    field: tuple[str, ...] | Meta | None
    types: tuple[str, ...] | None

    initial: Any = None
    needs_field = True

    def __init__(
        self, field: str | Meta | None = None, *, types: Sequence[str] | str | None = None
    ) -> None:
        name = type(self).__name__
        if field is None and self.needs_field:
            raise DefinitionError(f"{name} needs a field")
        object.__setattr__(self, "field", _path(name, field))
        object.__setattr__(self, "types", checked_names(name, "types", types))

    def __repr__(self) -> str:
        field = ".".join(self.field) if isinstance(self.field, tuple) else self.field
        types = f", types={list(self.types)}" if self.types is not None else ""
        return f"{type(self).__name__}({field!r}{types})"

    def step(self, current: Any, value: Any) -> Any:
        """The column after an event of the reducer's types whose value is `value`."""
        raise NotImplementedError


class Sum(Reducer):
    """The sum of the field's values; 0 before any.

    Example::

        import sqlalchemy as sa
        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections import ProjectionRunner, ReducerFold, StreamKey
        from eventcraft.projections.reducers import Sum

        balances = sa.Table(
            "balances", sa.MetaData(),
            sa.Column("account", sa.Text, primary_key=True),
            sa.Column("deposited", sa.BigInteger, nullable=False),
        )
        fold = ReducerFold(
            "balances", table=balances, key=StreamKey("account-"),
            columns={"deposited": Sum("cents", types="Deposited")},
        )
        with EventStore.open("memory://") as store, ProjectionRunner(store, [fold]) as runner:
            store.append("account-7", [NewEvent("Deposited", {"cents": 500}),
                                       NewEvent("Deposited", {"cents": 250})])
            runner.catch_up()
            with runner.database.reading() as connection:
                assert connection.execute(sa.select(balances)).all() == [("7", 750)]
    """

    initial = 0

    def step(self, current: Any, value: Any) -> Any:
        return current if value is None else current + value


class Count(Reducer):
    """How many events (of `types`) there were; with a field, how many carried it.

    A field counts where it holds a value of the column's kind, as for every
    reducer: in an integer column (a count's), a JSON integer. An event whose
    field holds text or null is not counted.

    Example::

        import sqlalchemy as sa
        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections import ProjectionRunner, ReducerFold, StreamKey
        from eventcraft.projections.reducers import Count

        carts = sa.Table(
            "carts", sa.MetaData(),
            sa.Column("cart", sa.Text, primary_key=True),
            sa.Column("items", sa.Integer, nullable=False),
            sa.Column("discounted", sa.Integer, nullable=False),
        )
        fold = ReducerFold(
            "carts", table=carts, key=StreamKey("cart-"),
            columns={
                "items": Count(types="ItemAdded"),  # every ItemAdded
                # those whose discount_cents holds an integer
                "discounted": Count("discount_cents", types="ItemAdded"),
            },
        )
        with EventStore.open("memory://") as store, ProjectionRunner(store, [fold]) as runner:
            store.append("cart-1", [NewEvent("ItemAdded", {"sku": "tea"}),
                                    NewEvent("ItemAdded", {"sku": "cup", "discount_cents": 50})])
            runner.catch_up()
            with runner.database.reading() as connection:
                assert connection.execute(sa.select(carts)).all() == [("1", 2, 1)]
    """

    initial = 0
    needs_field = False

    def step(self, current: Any, value: Any) -> Any:
        return current + 1 if value is not None or self.field is None else current


class Min(Reducer):
    """The least of the field's values; null before any.

    Example::

        import sqlalchemy as sa
        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections import ProjectionRunner, ReducerFold, StreamKey
        from eventcraft.projections.reducers import Min

        prices = sa.Table(
            "lowest_prices", sa.MetaData(),
            sa.Column("sku", sa.Text, primary_key=True),
            sa.Column("lowest", sa.BigInteger),  # null until a price is set
        )
        fold = ReducerFold(
            "lowest-prices", table=prices, key=StreamKey("product-"),
            columns={"lowest": Min("cents", types="PriceSet")},
        )
        with EventStore.open("memory://") as store, ProjectionRunner(store, [fold]) as runner:
            prices_set = [NewEvent("PriceSet", {"cents": n}) for n in (450, 390, 420)]
            store.append("product-tea", prices_set)
            runner.catch_up()
            with runner.database.reading() as connection:
                assert connection.execute(sa.select(prices)).all() == [("tea", 390)]
    """

    def step(self, current: Any, value: Any) -> Any:
        return value if value is not None and (current is None or value < current) else current


class Max(Reducer):
    """The greatest of the field's values; null before any.

    Example::

        import sqlalchemy as sa
        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections import ProjectionRunner, ReducerFold, StreamKey
        from eventcraft.projections.reducers import Max

        bids = sa.Table(
            "highest_bids", sa.MetaData(),
            sa.Column("auction", sa.Text, primary_key=True),
            sa.Column("highest", sa.BigInteger),  # null until the first bid
        )
        fold = ReducerFold(
            "highest-bids", table=bids, key=StreamKey("auction-"),
            columns={"highest": Max("bid.cents", types="BidPlaced")},  # a path into the data
        )
        with EventStore.open("memory://") as store, ProjectionRunner(store, [fold]) as runner:
            placed = [NewEvent("BidPlaced", {"bid": {"cents": n}}) for n in (100, 250, 180)]
            store.append("auction-9", placed)
            runner.catch_up()
            with runner.database.reading() as connection:
                assert connection.execute(sa.select(bids)).all() == [("9", 250)]
    """

    def step(self, current: Any, value: Any) -> Any:
        return value if value is not None and (current is None or value > current) else current


class First(Reducer):
    """The field's first value, in log order.

    Example::

        import sqlalchemy as sa
        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections import ProjectionRunner, ReducerFold, StreamKey
        from eventcraft.projections.reducers import First

        customers = sa.Table(
            "first_orders", sa.MetaData(),
            sa.Column("customer", sa.Text, primary_key=True),
            sa.Column("first_sku", sa.Text),
        )
        fold = ReducerFold(
            "first-orders", table=customers, key=StreamKey("customer-"),
            columns={"first_sku": First("sku", types="OrderPlaced")},
        )
        with EventStore.open("memory://") as store, ProjectionRunner(store, [fold]) as runner:
            store.append("customer-ann", [NewEvent("OrderPlaced", {"sku": "tea"}),
                                          NewEvent("OrderPlaced", {"sku": "cup"})])
            runner.catch_up()
            with runner.database.reading() as connection:
                assert connection.execute(sa.select(customers)).all() == [("ann", "tea")]
    """

    def step(self, current: Any, value: Any) -> Any:
        return value if current is None else current


class Last(Reducer):
    """The field's last value, in log order.

    Example::

        import sqlalchemy as sa
        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections import ProjectionRunner, ReducerFold, StreamKey
        from eventcraft.projections.reducers import Last

        parcels = sa.Table(
            "parcels", sa.MetaData(),
            sa.Column("parcel", sa.Text, primary_key=True),
            sa.Column("seen_in", sa.Text),
        )
        fold = ReducerFold(
            "parcels", table=parcels, key=StreamKey("parcel-"),
            columns={"seen_in": Last("city")},  # events without a city pass over it
        )
        with EventStore.open("memory://") as store, ProjectionRunner(store, [fold]) as runner:
            store.append("parcel-1", [NewEvent("Scanned", {"city": "Lyon"}),
                                      NewEvent("Scanned", {"city": "Paris"}),
                                      NewEvent("Delayed", {"reason": "strike"})])
            runner.catch_up()
            with runner.database.reading() as connection:
                assert connection.execute(sa.select(parcels)).all() == [("1", "Paris")]
    """

    def step(self, current: Any, value: Any) -> Any:
        return current if value is None else value


class Set(Reducer):
    """What the last event of `types` carried in the field, null included.

    Example::

        import sqlalchemy as sa
        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections import ProjectionRunner, ReducerFold, StreamKey
        from eventcraft.projections.reducers import Set

        contacts = sa.Table(
            "contacts", sa.MetaData(),
            sa.Column("customer", sa.Text, primary_key=True),
            sa.Column("phone", sa.Text),
        )
        fold = ReducerFold(
            "contacts", table=contacts, key=StreamKey("customer-"),
            columns={"phone": Set("phone", types=["Registered", "PhoneChanged"])},
        )
        with EventStore.open("memory://") as store, ProjectionRunner(store, [fold]) as runner:
            store.append("customer-ann", [NewEvent("Registered", {"phone": "555-0100"})])
            store.append("customer-bob", [NewEvent("Registered", {"phone": "555-0199"}),
                                          NewEvent("PhoneChanged", {"phone": None})])  # removed
            runner.catch_up()
            with runner.database.reading() as connection:
                rows = connection.execute(sa.select(contacts).order_by("customer")).all()
            assert rows == [("ann", "555-0100"), ("bob", None)]
    """

    def __init__(self, field: str | Meta, *, types: Sequence[str] | str) -> None:
        if types is None:
            raise DefinitionError("Set needs the event types that set it")
        super().__init__(field, types=types)

    def step(self, current: Any, value: Any) -> Any:
        return value


class ReducerFold(Fold):
    """A `Fold` whose row is a reducer per column.

    Every column of the table but the key has a reducer. Keys follow
    `Fold`'s rules; a `StreamKey` lets Spark compute them in the JVM too.

    A reducer reads its field by path from the event's data as stored, in
    Spark SQL as in Python, so it cannot run an upcaster: `registry=` is
    refused. Reduce fields whose meaning no upcaster changes, or give a
    `Fold` the registry, which reads typed events in every runner.

    Example::

        import sqlalchemy as sa
        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections import ProjectionRunner, ReducerFold, StreamKey
        from eventcraft.projections.reducers import Count, Set, Sum

        totals_table = sa.Table(
            "account_totals", sa.MetaData(),
            sa.Column("account_id", sa.Text, primary_key=True),
            sa.Column("deposited", sa.BigInteger, nullable=False),
            sa.Column("deposits", sa.Integer, nullable=False),
            sa.Column("owner", sa.Text),
        )
        totals = ReducerFold(
            "account_totals",
            table=totals_table,  # primary key: account_id
            key=StreamKey("account-"),
            columns={
                "deposited": Sum("amount_cents", types="MoneyDeposited"),
                "deposits": Count(types="MoneyDeposited"),
                "owner": Set("owner", types="AccountOpened"),
            },
        )
        store = EventStore.open("sqlite:///bank.db")
        store.append("account-1", [
            NewEvent("AccountOpened", {"owner": "ann"}),
            NewEvent("MoneyDeposited", {"amount_cents": 500}),
            NewEvent("MoneyDeposited", {"amount_cents": 1200}),
        ])
        with ProjectionRunner(store, [totals]) as runner:
            runner.catch_up()
            with runner.database.reading() as connection:
                assert connection.execute(sa.select(totals_table)).all() == [("1", 1700, 2, "ann")]
        store.close()
    """

    def __init__(
        self,
        name: str,
        *,
        table: sa.Table,
        key: Callable[[RecordedEvent], Hashable | None],
        columns: Mapping[str, Reducer],
        types: Sequence[str] | str | None = None,
        categories: Sequence[str] | str | None = None,
        on_error: ErrorPolicy | None = None,
        registry: EventDecoder | None = None,
    ) -> None:
        if registry is not None:
            raise DefinitionError(
                f"{name}: a ReducerFold reads events as stored (its fields by path, in "
                "Spark SQL too) and cannot upcast them; give the registry to a Fold, "
                "whose key and apply receive typed, upcast events in every runner"
            )
        super().__init__(
            name,
            table=table,
            key=key,
            initial=self._initial,
            apply=self._apply,
            types=types,
            categories=categories,
            on_error=on_error,
        )
        wanted = [c.name for c in table.columns if c.name != self.key_column]
        if sorted(columns) != sorted(wanted) or not all(
            isinstance(r, Reducer) for r in columns.values()
        ):
            raise DefinitionError(
                f"{name}: a reducer for each column of {table.name!r} but the key "
                f"({', '.join(wanted)}), not {dict(columns)!r}"
            )
        self.reducers = dict(columns)
        self.kinds = {column: kind_of(name, table.c[column], r) for column, r in columns.items()}
        self._times = [column for column, kind in self.kinds.items() if kind == TIME]
        self._readers = [
            (column, reducer, reader(reducer.field, self.kinds[column]), reducer.types)
            for column, reducer in self.reducers.items()
        ]

    def _initial(self, key: Any) -> State:
        return {column: reducer.initial for column, reducer in self.reducers.items()}

    def _apply(self, state: State, event: RecordedEvent) -> State:
        row = dict(state)
        for column in self._times:
            at = row[column]
            if at is not None and at.tzinfo is None:
                # A database without zones (SQLite) gives back the UTC it was given, naive.
                row[column] = at.replace(tzinfo=UTC)
        for column, reducer, read, types in self._readers:
            if types is None or event.type in types:
                row[column] = reducer.step(row[column], read(event))
        return row


def kind_of(name: str, column: sa.Column[Any], reducer: Reducer) -> str:
    """The kind of value `column` holds, checked against what `reducer` can put there."""
    sql = column.type
    kind = (
        BOOLEAN
        if isinstance(sql, sa.Boolean)
        else INTEGER
        if isinstance(sql, sa.Integer)
        else FLOAT
        if isinstance(sql, sa.Float)
        else TEXT
        if isinstance(sql, sa.String)
        else TIME
        if isinstance(sql, sa.DateTime)
        else None
    )
    field = reducer.field
    if isinstance(reducer, Count):
        fits = kind == INTEGER
    elif field == RECORDED_AT:
        fits = kind == TIME and not isinstance(reducer, Sum)
    elif isinstance(reducer, Sum) or field == POSITION:
        fits = kind in (INTEGER, FLOAT)
    else:
        fits = kind in (INTEGER, FLOAT, TEXT, BOOLEAN)
    if kind is None or not fits:
        raise DefinitionError(
            f"{name}: {reducer!r} cannot fill column {column.name!r} ({sql}); "
            "Sum takes integer or float columns, Count integer ones, the others "
            "integer, float, text or boolean ones, and a time column takes RECORDED_AT"
        )
    return kind


def reader(field: tuple[str, ...] | Meta | None, kind: str) -> Callable[[RecordedEvent], Any]:
    """The function reading `field` of an event as `kind`, None where it is absent."""
    if field is None:
        return lambda event: None
    if isinstance(field, Meta):
        attribute = field.name
        if kind == FLOAT:
            return lambda event: float(getattr(event, attribute))
        return lambda event: getattr(event, attribute)
    typed = _TYPED[kind]
    if len(field) == 1:
        (only,) = field

        def flat(event: RecordedEvent) -> Any:
            return typed(event.data.get(only))

        return flat

    def nested(event: RecordedEvent) -> Any:
        value: Any = event.data
        for segment in field:
            if type(value) is not dict:
                return None
            value = value.get(segment)
        return typed(value)

    return nested


def _integer(value: Any) -> int | None:
    return value if type(value) is int and -_INT64 <= value < _INT64 else None


def _float(value: Any) -> float | None:
    if type(value) is float:
        return value
    if type(value) is int:
        try:
            return float(value)
        except OverflowError:
            return None
    return None


def _text(value: Any) -> str | None:
    return value if type(value) is str else None


def _boolean(value: Any) -> bool | None:
    return value if type(value) is bool else None


_TYPED: dict[str, Callable[[Any], Any]] = {
    INTEGER: _integer,
    FLOAT: _float,
    TEXT: _text,
    BOOLEAN: _boolean,
}


def _path(name: str, field: str | Meta | None) -> tuple[str, ...] | Meta | None:
    if field is None or isinstance(field, Meta):
        return field
    segments = tuple(field.split(".")) if isinstance(field, str) else ()
    if not segments or not all(_SEGMENT.fullmatch(s) for s in segments):
        raise DefinitionError(
            f"{name}: a field is a path of names (letters, digits, underscores) joined by "
            f"dots, or POSITION or RECORDED_AT, not {field!r}"
        )
    return segments


__all__ = [
    "POSITION",
    "RECORDED_AT",
    "Count",
    "First",
    "Last",
    "Max",
    "Min",
    "Reducer",
    "Set",
    "Sum",
]
