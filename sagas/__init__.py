"""sagas: durable orchestration with compensation, recorded in the event store."""

from .async_orchestrator import AsyncOrchestrator, request_async
from .context import StepContext
from .definition import Action, Awaiting, RetryPolicy, Saga, Step, wait_for
from .errors import (
    EventLoopRunning,
    ReplyTimeout,
    SagaDefinitionError,
    SagaError,
    SagaNotFound,
    SagaNotParked,
    StepTimedOut,
    UnknownSaga,
)
from .failures import Bug, Failure, StepFailure
from .journal import stream_of
from .orchestrator import Orchestrator
from .process_manager import ProcessManager, Route
from .request_reply import request
from .service import OrchestratorStatus
from .state import InFlight, SagaState

__all__ = [
    "Action",
    "AsyncOrchestrator",
    "Awaiting",
    "Bug",
    "EventLoopRunning",
    "Failure",
    "InFlight",
    "Orchestrator",
    "OrchestratorStatus",
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
    "StepFailure",
    "StepTimedOut",
    "UnknownSaga",
    "request",
    "request_async",
    "stream_of",
    "wait_for",
]
