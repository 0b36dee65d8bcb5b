"""`App`: what a service runs, gathered in one object the command line and the console load.

# myservice/eventcraft_app.py
app = App(store="postgresql://db/orders", projections=[balances], sagas=[checkout])

$ eventcraft --app myservice.eventcraft_app:app projections status
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from eventcraft.domain import EventRegistry
from eventcraft.projections import Definition
from eventcraft.sagas import Saga

from .operations.errors import InputError
from .operations.references import load_reference


@dataclass(frozen=True)
class App:
    """A service's event store and the definitions it runs against it.

    The command line and the console load it by name (`--app shop:app`).

    Example::

        import sqlalchemy as sa
        from eventcraft import App
        from eventcraft.projections import Fold, StreamKey

        totals = sa.Table(
            "totals", sa.MetaData(),
            sa.Column("order_id", sa.Text, primary_key=True),
            sa.Column("cents", sa.BigInteger, nullable=False),
        )
        order_totals = Fold(
            "order-totals", table=totals, types=["OrderPlaced"], key=StreamKey("order-"),
            initial=lambda key: {"order_id": key, "cents": 0},
            apply=lambda row, event: {**row, "cents": event.data["cents"]},
        )
        app = App(store="sqlite:///shop.db", projections=[order_totals])
        assert [d.name for d in app.projections] == ["order-totals"]
    """

    store: str | None = None
    """The store URL; `--store` or `EVENTCRAFT_STORE` override it."""
    projections: Sequence[Definition] = field(default_factory=tuple)
    """The projections, folds and subscriptions its runners run."""
    sagas: Sequence[Saga] = field(default_factory=tuple)
    """The sagas its orchestrators run."""
    registry: EventRegistry | None = None
    """Its domain events, for commands that decode them."""
    database: str | None = None
    """The read models' database URL, when it is not the store's."""

    def __post_init__(self) -> None:
        for definition in self.projections:
            if not isinstance(definition, Definition):
                raise InputError(f"App.projections holds {definition!r}, not a projection")
        for saga in self.sagas:
            if not isinstance(saga, Saga):
                raise InputError(f"App.sagas holds {saga!r}, not a Saga")
        names = [d.name for d in self.projections]
        if len(set(names)) != len(names):
            raise InputError(f"App.projections names a projection twice: {names}")


def load_app(reference: str) -> App:
    """The `App` named `module:attribute`, the module found from the current folder too."""
    found = load_reference(reference, "the app")
    if not isinstance(found, App):
        raise InputError(f"{reference!r} is {type(found).__name__}, not an eventcraft.App")
    return found
