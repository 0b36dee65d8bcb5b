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
    """Base of every sagas error."""


class SagaDefinitionError(SagaError, TypeError):
    """A saga or one of its steps is declared wrongly."""


class SagaNotFound(SagaError, LookupError):
    """The store holds no instance of the saga `name` with the id `saga_id`."""

    def __init__(self, name: str, saga_id: str) -> None:
        super().__init__(f"no {name!r} saga with id {saga_id!r}")
        self.name = name
        self.saga_id = saga_id


class UnknownSaga(SagaError, LookupError):
    """The stream names a saga definition this orchestrator does not hold."""


class SagaNotParked(SagaError):
    """A retry, compensation or resolution of an instance that is not parked."""

    def __init__(self, stream_id: str, status: str) -> None:
        super().__init__(f"{stream_id} is {status}, not parked")
        self.stream_id = stream_id
        self.status = status


class StepTimedOut(SagaError, TimeoutError):
    """A try of a step ran past the step's `timeout`; it counts as a failed try."""

    def __init__(self, step: str, seconds: float) -> None:
        super().__init__(f"step {step!r} ran past its timeout of {seconds} s")
        self.step = step
        self.seconds = seconds


class ReplyTimeout(SagaError, TimeoutError):
    """`request` waited its `timeout` and no reply of the types it named came."""

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
