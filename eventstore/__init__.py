"""eventstore: an append-only log of events in streams, with one global order."""

from .archive_layout import chain_break as archive_chain_break
from .archive_layout import segment_name
from .archive_layout import span_of as segment_span
from .arguments import redacted, without_password
from .async_store import AsyncEventStore
from .async_tenants import AsyncTenants
from .backends import BackendKind, register_backend, scheme_of
from .blocking import BlockingEventStore
from .columns import events_from_columns
from .deletion import StreamDeletion
from .encoding import (
    MAX_AFTER,
    MAX_EVENT_BYTES,
    MAX_INT,
    check_events,
    check_name,
    check_new_name,
    check_stream_id,
    encode_object,
)
from .errors import (
    AppendConditionFailed,
    AppendOutcomeUnknown,
    ArchiveUnreadable,
    BadImportLine,
    DuplicateEventId,
    EventStoreError,
    ImportStopped,
    InvalidEvent,
    InvalidTenant,
    PoolExhausted,
    RetentionBusy,
    StorePermissionDenied,
    StoreUnavailable,
    StreamFull,
    StreamTombstoned,
    TenantStoresBusy,
    UnreadablePersonalData,
    UnsupportedStoreURL,
    WrongExpectedVersion,
)
from .events import (
    ANY,
    EVENT_VERSION,
    MAX_STREAM_VERSION,
    NO_STREAM,
    AppendResult,
    EncodedEvent,
    EncodedRecord,
    ExpectedVersion,
    NewEvent,
    RecordedEvent,
    StreamInfo,
    StreamState,
    category_of,
    recorded_at_text,
)
from .file_lock import file_lock
from .ids import new_event_id
from .json_lines import JsonLines, with_placed
from .log_status import HeldPosition, LogStatus, ReplicaLag
from .personal.envelope import TEXT_MARK as SEALED_MARK
from .personal.fields import FORGOTTEN, Personal
from .personal.keys import KeyStore
from .port import Backend
from .postgres import PostgresTarget
from .postgres.log_subquery import postgres_log_subquery
from .presence import postgres_holds_store, sqlite_file_holds_store
from .query import AppendCondition, Query, QueryItem, QueryResult
from .snapshot import Snapshot
from .sqlite.options import SQLiteTarget
from .sqlite.retention import RETENTION_LOCK_SUFFIX
from .store import EventStore
from .tenant_ids import MAX_TENANT_LENGTH, check_tenant
from .tenant_move import PositionMap, TenantMove, move_tenant, move_tenant_log
from .tenant_places import TenantDrop, TenantPlace, tenant_place
from .tenants import Tenants
from .transfer import (
    ExportReport,
    ImportReport,
    checked_import,
    export_lines,
    export_log,
    import_log,
)
from .type_counts import TypeCount, schema_version_of
from .verification import LogProblem, LogVerification, verify_log

__all__ = [
    "ANY",
    "EVENT_VERSION",
    "FORGOTTEN",
    "MAX_AFTER",
    "MAX_EVENT_BYTES",
    "MAX_INT",
    "MAX_STREAM_VERSION",
    "MAX_TENANT_LENGTH",
    "NO_STREAM",
    "RETENTION_LOCK_SUFFIX",
    "SEALED_MARK",
    "AppendCondition",
    "AppendConditionFailed",
    "AppendOutcomeUnknown",
    "AppendResult",
    "ArchiveUnreadable",
    "AsyncEventStore",
    "AsyncTenants",
    "Backend",
    "BackendKind",
    "BadImportLine",
    "BlockingEventStore",
    "DuplicateEventId",
    "EncodedEvent",
    "EncodedRecord",
    "EventStore",
    "EventStoreError",
    "ExpectedVersion",
    "ExportReport",
    "HeldPosition",
    "ImportReport",
    "ImportStopped",
    "InvalidEvent",
    "InvalidTenant",
    "JsonLines",
    "KeyStore",
    "LogProblem",
    "LogStatus",
    "LogVerification",
    "NewEvent",
    "Personal",
    "PoolExhausted",
    "PositionMap",
    "PostgresTarget",
    "Query",
    "QueryItem",
    "QueryResult",
    "RecordedEvent",
    "ReplicaLag",
    "RetentionBusy",
    "SQLiteTarget",
    "Snapshot",
    "StorePermissionDenied",
    "StoreUnavailable",
    "StreamDeletion",
    "StreamFull",
    "StreamInfo",
    "StreamState",
    "StreamTombstoned",
    "TenantDrop",
    "TenantMove",
    "TenantPlace",
    "TenantStoresBusy",
    "Tenants",
    "TypeCount",
    "UnreadablePersonalData",
    "UnsupportedStoreURL",
    "WrongExpectedVersion",
    "archive_chain_break",
    "category_of",
    "check_events",
    "check_name",
    "check_new_name",
    "check_stream_id",
    "check_tenant",
    "checked_import",
    "encode_object",
    "events_from_columns",
    "export_lines",
    "export_log",
    "file_lock",
    "import_log",
    "move_tenant",
    "move_tenant_log",
    "new_event_id",
    "postgres_holds_store",
    "postgres_log_subquery",
    "recorded_at_text",
    "redacted",
    "register_backend",
    "schema_version_of",
    "scheme_of",
    "segment_name",
    "segment_span",
    "sqlite_file_holds_store",
    "tenant_place",
    "verify_log",
    "with_placed",
    "without_password",
]
