"""sagas: durable orchestration with compensation, recorded in the event store."""

from .context import StepContext
from .definition import Action, RetryPolicy, Saga, Step
from .errors import (
    SagaDefinitionError,
    SagaError,
    SagaNotFound,
    SagaNotParked,
    StepTimedOut,
    UnknownSaga,
)
from .orchestrator import Orchestrator, stream_of
from .state import InFlight, SagaState

__all__ = [
    "Action",
    "InFlight",
    "Orchestrator",
    "RetryPolicy",
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
    "stream_of",
]
