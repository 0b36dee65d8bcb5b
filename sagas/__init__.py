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
from .index import SAGA_CATEGORY, SagaIndex
from .journal import saga_of_stream, stream_of
from .orchestrator import Orchestrator
from .process_manager import ProcessManager, Route
from .request_reply import request
from .service import OrchestratorStatus
from .state import InFlight, SagaState, idempotency_key
from .telemetry import make_saga_gauges
from .tenants_orchestrator import TenantsOrchestrator
from .timeline import SagaTransition, saga_timeline

__all__ = [
    "SAGA_CATEGORY",
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
    "SagaIndex",
    "SagaNotFound",
    "SagaNotParked",
    "SagaState",
    "SagaTransition",
    "Step",
    "StepContext",
    "StepFailure",
    "StepTimedOut",
    "TenantsOrchestrator",
    "UnknownSaga",
    "idempotency_key",
    "make_saga_gauges",
    "request",
    "request_async",
    "saga_of_stream",
    "saga_timeline",
    "stream_of",
    "wait_for",
]
