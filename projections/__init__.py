"""projections: read models kept from the global log, exactly once, live or rebuilt."""

from .archive_layout import chain_break as archive_chain_break
from .archive_layout import span_of as segment_span
from .archive_lock import ArchiveBusy
from .archive_lock import run_lock as archive_run_lock
from .async_runner import AsyncProjectionRunner
from .checkpoint import checkpoint_leases, checkpoint_positions
from .competing import PartitionedRunner, PartitionWorker
from .database import Database
from .definition import Definition
from .errors import (
    DefinitionError,
    ParkedEventNotFound,
    ProjectionError,
    ProjectionStopped,
    ProjectionTimeout,
    TableConflict,
    UnknownProjection,
)
from .fold import Fold, State
from .fold_keys import StreamKey
from .keeping import kept_alive
from .log_start import event_at
from .parking import ParkedEvent, forget_parked_errors, parked_positions
from .partitions import Partition, PartitionProjection, PartitionSubscription, partition_of
from .policy import ErrorPolicy
from .projection import Handler, Projection
from .projector import read_batch
from .read_model import ReadModel
from .rebuild import RebuildReport
from .reducers import ReducerFold
from .runner import ProjectionRunner
from .schema import PARKED as PARKED_TABLE
from .selection import narrowed
from .status import LAG_COUNTED, Lag, ProjectionStatus, lag_of, never_run
from .subscription import Subscription
from .telemetry import make_projection_gauges
from .tracebacks import bare_traceback
from .typed_event import EventDecoder, TypedEvent

__all__ = [
    "LAG_COUNTED",
    "PARKED_TABLE",
    "ArchiveBusy",
    "AsyncProjectionRunner",
    "Database",
    "Definition",
    "DefinitionError",
    "ErrorPolicy",
    "EventDecoder",
    "Fold",
    "Handler",
    "Lag",
    "ParkedEvent",
    "ParkedEventNotFound",
    "Partition",
    "PartitionProjection",
    "PartitionSubscription",
    "PartitionWorker",
    "PartitionedRunner",
    "Projection",
    "ProjectionError",
    "ProjectionRunner",
    "ProjectionStatus",
    "ProjectionStopped",
    "ProjectionTimeout",
    "ReadModel",
    "RebuildReport",
    "ReducerFold",
    "State",
    "StreamKey",
    "Subscription",
    "TableConflict",
    "TypedEvent",
    "UnknownProjection",
    "archive_chain_break",
    "archive_run_lock",
    "bare_traceback",
    "checkpoint_leases",
    "checkpoint_positions",
    "event_at",
    "forget_parked_errors",
    "kept_alive",
    "lag_of",
    "make_projection_gauges",
    "narrowed",
    "never_run",
    "parked_positions",
    "partition_of",
    "read_batch",
    "segment_span",
]
