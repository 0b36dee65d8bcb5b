"""sagas: durable orchestration with compensation, recorded in the event store."""

from .context import StepContext
from .definition import Action, Awaiting, RetryPolicy, Saga, Step, wait_for
from .errors import (
    ReplyTimeout,
    SagaDefinitionError,
    SagaError,
    SagaNotFound,
    SagaNotParked,
    StepTimedOut,
    UnknownSaga,
)
from .orchestrator import Orchestrator, stream_of
from .process_manager import ProcessManager, Route
from .request_reply import request
from .state import InFlight, SagaState

__all__ = [
    "Action",
    "Awaiting",
    "InFlight",
    "Orchestrator",
    "ProcessManager",
    "ReplyTimeout",
    "RetryPolicy",
    "Route",
    "Saga",
    "SagaDefinitionError",
    "SagaError",
    "SagaNotFound",
    "SagaNotParked",
    "SagaState",
    "Step",
    "StepContext",
    "StepTimedOut",
    "UnknownSaga",
    "request",
    "stream_of",
    "wait_for",
]
