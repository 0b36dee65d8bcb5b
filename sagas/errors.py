"""The sagas package's exceptions.

SagaError
 ├── SagaDefinitionError (TypeError)   a saga or step declared wrongly
 ├── SagaNotFound (LookupError)        no saga instance with that id
 ├── UnknownSaga (LookupError)         the orchestrator was not given that definition
 ├── SagaNotParked                     retry/resolve of a saga that is not parked
 ├── StepTimedOut (TimeoutError)       a step ran past its timeout (recorded as its failure)
 ├── ReplyTimeout (TimeoutError)       no reply to a request within its timeout
 └── EventLoopRunning (RuntimeError)   async steps driven from a thread whose event loop runs
"""

from __future__ import annotations


class SagaError(Exception):
    """Base of every sagas error.

    Example::

        from eventcraft.eventstore import EventStore
        from eventcraft.sagas import Orchestrator, Saga, Step, SagaError

        def reserve(data, context):
            return {"reservation": context.idempotency_key}

        fulfilment = Saga("fulfilment", [Step("reserve", reserve)])
        store = EventStore.open("sqlite:///shop.db")
        orchestrator = Orchestrator(store, [fulfilment])
        orchestrator.start(fulfilment, {"sku": "tea"}, saga_id="order-1")
        orchestrator.run_pending()
        try:
            orchestrator.resolve("fulfilment", "order-1", "refunded by hand")
        except SagaError as error:  # here a SagaNotParked: the saga completed
            assert str(error) == "saga-fulfilment:order-1 is completed, not parked"
        store.close()
    """


class SagaDefinitionError(SagaError, TypeError):
    """A saga or one of its steps is declared wrongly.

    Example::

        from eventcraft.sagas import SagaDefinitionError, Step

        def reserve(data, context): ...

        try:
            Step("reserve stock", reserve)
        except SagaDefinitionError as error:
            assert isinstance(error, TypeError)
            assert str(error) == (
                "a step name is 1-80 letters, digits, _ and . characters, not 'reserve stock'"
            )
    """


class SagaNotFound(SagaError, LookupError):
    """The store holds no instance of the saga `name` with the id `saga_id`.

    Example::

        from eventcraft.eventstore import EventStore
        from eventcraft.sagas import Orchestrator, Saga, Step, SagaNotFound

        def reserve(data, context):
            return {"reservation": context.idempotency_key}

        fulfilment = Saga("fulfilment", [Step("reserve", reserve)])
        store = EventStore.open("sqlite:///shop.db")
        orchestrator = Orchestrator(store, [fulfilment])
        try:
            orchestrator.state("fulfilment", "order-9")
        except SagaNotFound as error:
            assert isinstance(error, LookupError)
            assert (error.name, error.saga_id) == ("fulfilment", "order-9")
        store.close()
    """

    def __init__(self, name: str, saga_id: str) -> None:
        super().__init__(f"no {name!r} saga with id {saga_id!r}")
        self.name = name
        self.saga_id = saga_id


class UnknownSaga(SagaError, LookupError):
    """The stream names a saga definition this orchestrator does not hold.

    Example::

        from eventcraft.eventstore import EventStore
        from eventcraft.sagas import Orchestrator, Saga, Step, UnknownSaga

        def reserve(data, context):
            return {"reservation": context.idempotency_key}

        fulfilment = Saga("fulfilment", [Step("reserve", reserve)])
        store = EventStore.open("sqlite:///shop.db")
        orchestrator = Orchestrator(store, [fulfilment])
        billing = Saga("billing", [Step("invoice", reserve)])  # run by another service
        try:
            orchestrator.start(billing, {"cents": 1200})
        except UnknownSaga as error:
            assert str(error) == "this orchestrator does not run saga 'billing'"
        store.close()
    """


class SagaNotParked(SagaError):
    """A retry, compensation or resolution of an instance that is not parked.

    Example::

        from eventcraft.eventstore import EventStore
        from eventcraft.sagas import Orchestrator, Saga, Step, SagaNotParked

        def reserve(data, context):
            return {"reservation": context.idempotency_key}

        fulfilment = Saga("fulfilment", [Step("reserve", reserve)])
        store = EventStore.open("sqlite:///shop.db")
        orchestrator = Orchestrator(store, [fulfilment])
        orchestrator.start(fulfilment, {"sku": "tea"}, saga_id="order-1")
        orchestrator.run_pending()
        try:
            orchestrator.retry("fulfilment", "order-1")
        except SagaNotParked as error:
            assert (error.stream_id, error.status) == ("saga-fulfilment:order-1", "completed")
        store.close()
    """

    def __init__(self, stream_id: str, status: str) -> None:
        super().__init__(f"{stream_id} is {status}, not parked")
        self.stream_id = stream_id
        self.status = status


class StepTimedOut(SagaError, TimeoutError):
    """A try of a step ran past the step's `timeout`; it counts as a failed try.

    The orchestrator records it as the step's failure; the step may have taken
    effect, so its compensation runs too.

    Example::

        import asyncio

        from eventcraft.eventstore import EventStore
        from eventcraft.sagas import Orchestrator, Saga, Step, StepTimedOut

        told = []

        async def book_courier(data, context):
            await asyncio.sleep(60)  # the courier's API hangs

        async def cancel_booking(data, context):
            told.append(context.failure)

        booking = Step("book", book_courier, cancel_booking, timeout=0.05)
        shipping = Saga("shipping", [booking])
        store = EventStore.open("sqlite:///shop.db")
        orchestrator = Orchestrator(store, [shipping])
        orchestrator.start(shipping, {"parcel": 7}, saga_id="parcel-7")
        orchestrator.run_pending()
        assert orchestrator.state("shipping", "parcel-7").status == "compensated"
        (failure,) = told
        assert (failure.step, failure.error_type) == ("book", StepTimedOut.__name__)
        assert failure.message == "step 'book' ran past its timeout of 0.05 s"
        store.close()
    """

    def __init__(self, step: str, seconds: float) -> None:
        super().__init__(f"step {step!r} ran past its timeout of {seconds} s")
        self.step = step
        self.seconds = seconds


class ReplyTimeout(SagaError, TimeoutError):
    """`request` waited its `timeout` and no reply of the types it named came.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.sagas import ReplyTimeout, request

        store = EventStore.open("sqlite:///shop.db")
        command = NewEvent("BookCourier", {"parcel": 7})
        try:  # no courier service runs to answer it
            request(store, "courier-7", command, reply_types=["CourierBooked"], timeout=0.1)
        except ReplyTimeout as late:
            assert late.command_id == str(command.id)
            assert str(late) == f"no CourierBooked replied to BookCourier {command.id} within 0.1 s"
        store.close()
    """

    def __init__(
        self, command: str, command_id: str, reply_types: list[str], seconds: float
    ) -> None:
        super().__init__(
            f"no {' or '.join(reply_types)} replied to {command} {command_id} within {seconds} s"
        )
        self.command_id = command_id


class EventLoopRunning(SagaError, RuntimeError):
    """The orchestrator was called in a thread whose event loop is running, for async steps.

    An async action is run with `asyncio.run`, which cannot nest in a running
    loop; refusing the call (before anything is recorded) keeps that limit of
    the orchestrator from turning into a failed step and a compensated saga.

    Example::

        import asyncio

        from eventcraft.eventstore import EventStore
        from eventcraft.sagas import EventLoopRunning, Orchestrator, Saga, Step

        async def send_welcome(data, context):
            await asyncio.sleep(0)  # a mail service's async client

        welcome = Saga("welcome", [Step("mail", send_welcome)])
        store = EventStore.open("sqlite:///shop.db")
        orchestrator = Orchestrator(store, [welcome])
        orchestrator.start(welcome, {"customer": "ann"}, saga_id="ann")
        try:
            orchestrator.run_pending()  # on this running event loop
        except EventLoopRunning as error:
            assert "await asyncio.to_thread(orchestrator.run_pending)" in str(error)
        assert await asyncio.to_thread(orchestrator.run_pending) == 0  # as it says
        store.close()
    """

    def __init__(self, method: str, reason: str) -> None:
        arguments = "" if method in ("run_pending", "run") else ", ..."
        super().__init__(
            f"orchestrator.{method}() was called from a running event loop, where asyncio.run "
            f"cannot run async steps: {reason}. Call it in a thread: "
            f"`await asyncio.to_thread(orchestrator.{method}{arguments})`"
        )
        self.method = method
        self.reason = reason

    def __reduce__(self) -> tuple[type[EventLoopRunning], tuple[str, str]]:
        return (type(self), (self.method, self.reason))
