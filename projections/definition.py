"""What every kind of projection declares, whichever runner runs it."""

from __future__ import annotations

import abc
import re
from collections.abc import Iterable, Sequence

import sqlalchemy as sa
from eventcraft.eventstore import Query, RecordedEvent

from . import identifiers
from .errors import DefinitionError
from .policy import ErrorPolicy
from .read_model import ReadModel
from .typed_event import EventDecoder, checked_decoder

_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,100}")
# An attribute of the exception itself: the error store, rebuilds and retries
# all see the user's own exception, unwrapped.
_FAILED_AT = "_eventcraft_failed_at"


class Definition(abc.ABC):
    """A named reader of the global log: a projection, a fold or a subscription.

    The name is durable: it identifies the checkpoint, so renaming one
    starts it again from the beginning of the log.

    Example::

        import sqlalchemy as sa
        from eventcraft.projections import Definition, Fold, StreamKey, Subscription

        totals = sa.Table("totals", sa.MetaData(), sa.Column("order_id", sa.Text, primary_key=True),
                          sa.Column("cents", sa.BigInteger, nullable=False))
        definitions: list[Definition] = [  # what a runner or an App takes
            Fold("order-totals", table=totals, types=["OrderPlaced"], key=StreamKey("order-"),
                 initial=lambda key: {"order_id": key, "cents": 0},
                 apply=lambda row, event: {**row, "cents": event.data["cents"]}),
            Subscription("receipts", print, types=["OrderPaid"]),
        ]
        assert [(d.name, d.types) for d in definitions] == [
            ("order-totals", ("OrderPlaced",)), ("receipts", ("OrderPaid",))]
        assert [d.in_transaction for d in definitions] == [True, False]  # exactly/at least once
    """

    in_transaction = True
    """False for subscribers whose effects lie outside the database (at-least-once)."""

    def __init__(
        self,
        name: str,
        *,
        tables: Iterable[sa.Table] = (),
        categories: Sequence[str] | str | None = None,
        query: Query | None = None,
        on_error: ErrorPolicy | None = None,
        registry: EventDecoder | None = None,
    ) -> None:
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise DefinitionError(
                f"a projection name is 1-100 letters, digits and _.:- characters, not {name!r}"
            )
        self.name = name
        self.tables = tuple(_checked_tables(name, tables))
        self.categories = checked_names(name, "categories", categories)
        if query is not None and not isinstance(query, Query):
            raise DefinitionError(f"{name}: query must be an eventstore Query, not {query!r:.80}")
        self.query = query
        """Events of these types and tags only (with `types` and `categories`: all three)."""
        self.generation_tables: dict[int, dict[str, sa.Table]] = {}
        """The tables of each generation, made once (`generations.py`)."""
        self.on_error = ErrorPolicy() if on_error is None else on_error
        if not isinstance(self.on_error, ErrorPolicy):
            raise DefinitionError(f"on_error must be an ErrorPolicy, not {on_error!r}")
        self.registry = checked_decoder(name, registry)
        """The application's registry: with one, the definition's functions receive each
        event as a `TypedEvent`, typed and upcast as a repository's load decodes it; without,
        the `RecordedEvent` as stored."""

    @property
    @abc.abstractmethod
    def types(self) -> tuple[str, ...] | None:
        """The event types it reads; None for all."""

    @abc.abstractmethod
    def apply(self, read_model: ReadModel, events: Sequence[RecordedEvent]) -> None:
        """Apply `events`, in position order, inside the batch's transaction."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


def _checked_tables(name: str, tables: Iterable[sa.Table]) -> Iterable[sa.Table]:
    seen: set[str] = set()
    for table in tables:
        if not isinstance(table, sa.Table):
            raise DefinitionError(f"{name}: tables must be sqlalchemy Tables, not {table!r}")
        identifiers.check_declared(name, table)
        if table.fullname in seen:
            raise DefinitionError(f"{name}: table {table.fullname!r} is declared twice")
        seen.add(table.fullname)
        yield table


def note_failure(error: Exception, name: str, event: RecordedEvent) -> None:
    """Tie `error` to the event it was raised for.

    The runner counts a failed batch as the first try of that event (and of
    no other), and the note tells a reader of the traceback which event it was.
    """
    if failed_position(error) != event.position:
        error.add_note(f"{name}: raised for the event at position {event.position} ({event.type})")
    setattr(error, _FAILED_AT, event.position)


def failed_position(error: BaseException) -> int | None:
    """The position `note_failure` tied `error` to, if any."""
    position = getattr(error, _FAILED_AT, None)
    return position if isinstance(position, int) else None


def checked_names(
    name: str, what: str, names: Sequence[str] | str | None
) -> tuple[str, ...] | None:
    if names is None:
        return None
    if isinstance(names, str):
        names = (names,)
    checked = tuple(names)
    if not checked or not all(isinstance(n, str) and n for n in checked):
        raise DefinitionError(f"{name}: {what} must be non-empty names, not {names!r}")
    return checked
