"""The projections layer's exceptions.

::

    ProjectionError                      base of everything raised here
    ├── DefinitionError (TypeError)      a projection, fold or subscription declared wrongly
    ├── UnknownProjection (LookupError)  no projection of that name in this runner
    ├── ParkedEventNotFound (LookupError) no parked event at that position
    ├── ProjectionStopped                a handler kept failing under the "stop" policy
    ├── ProjectionTimeout (TimeoutError) `wait_until` ran out of time
    └── TableConflict                    a table of a declared name that the runner did not make

Store errors (`StoreUnavailable`, ...) and SQLAlchemy's errors from the
read-model database pass through unchanged.
"""

from __future__ import annotations


class ProjectionError(Exception):
    """Base of the projections layer's exceptions.

    Example::

        from eventcraft.eventstore import EventStore
        from eventcraft.projections import ProjectionError, ProjectionRunner, Subscription

        with EventStore.open("memory://") as store:
            with ProjectionRunner(store, [Subscription("receipts", lambda event: None)]) as runner:
                try:
                    runner.rebuild("receipts")  # a subscription has no read model to rebuild
                except ProjectionError as error:  # every error of eventcraft.projections
                    assert "no read model to rebuild" in str(error)
    """


class DefinitionError(ProjectionError, TypeError):
    """A projection, fold or subscription is declared wrongly; the message says how.

    Example::

        from eventcraft.projections import DefinitionError, Subscription

        try:
            Subscription("order receipts", print)  # a space: not a durable name
        except DefinitionError as error:
            assert "a projection name is 1-100 letters, digits and _.:- characters" in str(error)
            assert isinstance(error, TypeError)
    """


class UnknownProjection(ProjectionError, LookupError):
    """The runner has no projection of that name.

    Example::

        from eventcraft.eventstore import EventStore
        from eventcraft.projections import ProjectionRunner, Subscription, UnknownProjection

        with EventStore.open("memory://") as store:
            with ProjectionRunner(store, [Subscription("receipts", lambda event: None)]) as runner:
                try:
                    runner.parked("reciepts")  # a typo
                except UnknownProjection as error:
                    assert "no projection 'reciepts'" in str(error)
                    assert "(it runs ['receipts'])" in str(error)
    """


class ParkedEventNotFound(ProjectionError, LookupError):
    """No event of that projection is parked at that position, or another retry of it
    is under way.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections import ParkedEventNotFound, ProjectionRunner, Subscription

        store = EventStore.open("sqlite:///shop.db")
        store.append("order-1", [NewEvent("OrderPaid", {"cents": 900})])
        with ProjectionRunner(store, [Subscription("receipts", lambda event: None)]) as runner:
            runner.catch_up()  # nothing failed: nothing parked
            try:
                runner.retry_parked("receipts", 1)
            except ParkedEventNotFound as error:
                assert str(error) == "projection 'receipts' has no event parked at 1"
        store.close()
    """


class ProjectionStopped(ProjectionError):
    """A handler failed on every try and the projection's policy is to stop.

    The event is parked; the checkpoint is just before it, so a restarted
    runner tries it again, and `retry_parked`/`discard_parked` settle it.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections import (
            ErrorPolicy, ProjectionRunner, ProjectionStopped, Subscription,
        )

        def invoice(event):
            raise ConnectionError("the invoicing service is down")

        invoices = Subscription("invoices", invoice, on_error=ErrorPolicy(attempts=1, then="stop"))
        store = EventStore.open("sqlite:///shop.db")
        store.append("order-1", [NewEvent("OrderPaid", {"cents": 900})])
        with ProjectionRunner(store, [invoices]) as runner:
            try:
                runner.catch_up()
            except ProjectionStopped as stopped:
                assert (stopped.name, stopped.position) == ("invoices", 1)
                assert isinstance(stopped.error, ConnectionError)
            assert runner.status()[0].stopped_at == 1  # parked; retry_parked or discard_parked
        store.close()
    """

    def __init__(self, name: str, position: int, error: BaseException) -> None:
        self.name = name
        self.position = position
        self.error = error
        super().__init__(
            f"projection {name!r} stopped at position {position}: {type(error).__name__}: {error}"
        )


class ProjectionTimeout(ProjectionError, TimeoutError):
    """`wait_until` gave up before every projection reached the position.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections import ProjectionRunner, ProjectionTimeout, Subscription

        store = EventStore.open("sqlite:///shop.db")
        with ProjectionRunner(store, [Subscription("receipts", lambda event: None)]) as runner:
            written = store.append("order-1", [NewEvent("OrderPaid", {"cents": 900})])
            try:  # the runner was never started: nobody applies the event
                runner.wait_until(written.positions[-1], timeout=0.1)
            except ProjectionTimeout as error:
                assert error.behind == {"receipts": 0}  # who lags, at which checkpoint
                assert isinstance(error, TimeoutError)
        store.close()
    """

    def __init__(
        self, position: int, behind: dict[str, int], timeout: float, tenant: str | None = None
    ) -> None:
        self.position = position
        self.behind = behind
        """The projections that had not reached it, with their checkpoints."""
        self.tenant = tenant
        """Whose log the position is in, when a many-tenant runner waited; else None."""
        lagging = ", ".join(f"{name!r} at {at}" for name, at in sorted(behind.items()))
        whose = "" if tenant is None else f"tenant {tenant!r}: "
        super().__init__(f"{whose}position {position} not reached within {timeout:g} s: {lagging}")


class TableConflict(ProjectionError):
    """A table of a declared table's name exists that the runner did not make.

    The runner serves each declared table as a view of that name, and never
    replaces a table it did not make: the table is left as it was.

    Example::

        import sqlalchemy as sa
        from eventcraft.eventstore import EventStore
        from eventcraft.projections import Projection, ProjectionRunner, TableConflict

        orders = sa.Table("orders", sa.MetaData(), sa.Column("order_id", sa.Text, primary_key=True))
        order_list = Projection("order-list", tables=[orders])
        order_list.on("OrderPlaced")(lambda read_model, event: None)
        store = EventStore.open("sqlite:///shop.db")
        engine = sa.create_engine("sqlite:///shop.db")
        with engine.begin() as connection:
            connection.execute(sa.text("CREATE TABLE orders (id TEXT)"))  # someone else's table
        try:
            ProjectionRunner(store, [order_list])
        except TableConflict as error:
            assert "a table 'orders' exists and is not one the runner made" in str(error)
        engine.dispose()
        store.close()
    """
