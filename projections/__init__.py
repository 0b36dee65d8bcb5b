"""projections: read models kept from the global log, exactly once, live or rebuilt.

The Parquet archive's files (`ArchiveFiles`) need pyarrow, which comes with the
`retention` extra: the class is imported when it is first used, so the rest works
without it.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from eventcraft.eventstore import archive_chain_break, segment_span

from .archive_lock import ArchiveBusy
from .archive_lock import run_lock as archive_run_lock
from .async_runner import AsyncProjectionRunner
from .carried_checkpoints import CarriedCheckpoints, carry_checkpoints
from .checkpoint import Checkpoint, checkpoint_leases, checkpoint_positions
from .checkpoint_table import CheckpointTable
from .clock import local_deadline as lease_deadline
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
from .tenants_runner import TenantsRunner
from .tracebacks import bare_traceback
from .typed_event import EventDecoder, TypedEvent

if TYPE_CHECKING:
    from .archive_files import ArchiveFiles

_NEEDING_PYARROW = {"ArchiveFiles": "archive_files"}


def __getattr__(name: str) -> Any:
    module = _NEEDING_PYARROW.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        return getattr(import_module(f".{module}", __name__), name)
    except ImportError as error:
        raise ImportError(
            f"{name} needs pyarrow: pip install 'eventcraft[retention]' ({error})"
        ) from error


__all__ = [
    "LAG_COUNTED",
    "PARKED_TABLE",
    "ArchiveBusy",
    "ArchiveFiles",
    "AsyncProjectionRunner",
    "CarriedCheckpoints",
    "Checkpoint",
    "CheckpointTable",
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
    "TenantsRunner",
    "TypedEvent",
    "UnknownProjection",
    "archive_chain_break",
    "archive_run_lock",
    "bare_traceback",
    "carry_checkpoints",
    "checkpoint_leases",
    "checkpoint_positions",
    "event_at",
    "forget_parked_errors",
    "kept_alive",
    "lag_of",
    "lease_deadline",
    "make_projection_gauges",
    "narrowed",
    "never_run",
    "parked_positions",
    "partition_of",
    "read_batch",
    "segment_span",
]
