"""`verify_events`: every event of a log decoded through a registry as a Spark job.

What `eventcraft schema verify --spark` runs for a log too large for one process:
the executors decode each event with the registry, exactly as `read_events` gives a
registered type's typed column (`registry.decode`, upcasting included), and Spark
counts the events by type and stored schema version, keeping the first failure of
each with its error.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

import pyarrow as pa
from eventcraft.eventstore import schema_version_of
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..errors import DefinitionError
from ..typed_event import EventDecoder
from .archive import Archive
from .personal import opened
from .rows import events_of
from .source import check_readable
from .whole_log import read_whole_log

_DECODED = T.StructType(
    [
        T.StructField("type", T.StringType()),
        T.StructField("event_version", T.LongType()),
        T.StructField("position", T.LongType()),
        T.StructField("recorded_at", T.TimestampType()),
        T.StructField("error", T.StringType()),
    ]
)


@dataclass(frozen=True, slots=True)
class VerifiedTypeVersion:
    """The events of one type at one stored schema version, decoded in Spark.

    Example::

        # needs: spark
        from eventcraft.domain import DomainEvent, EventRegistry
        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections.spark import LOCAL_SETTINGS, spark_session, verify_events

        shop = EventRegistry()

        @shop.event("OrderPlaced")
        class OrderPlaced(DomainEvent):
            cents: int

        with EventStore.open("sqlite:///shop.db") as store:
            store.append("order-1", [NewEvent("OrderPlaced", {"cents": 5})])
        spark = spark_session("local[2]", settings=LOCAL_SETTINGS)
        (counted,) = verify_events(spark, "sqlite:///shop.db", shop)
        assert (counted.type, counted.event_version, counted.events) == ("OrderPlaced", 1, 1)
    """

    type: str
    event_version: int
    """The schema version the events were stored at (`schema_version_of`)."""
    events: int
    failed: int
    first_failure: int | None
    """The position of the first that does not decode."""
    error: str | None
    """Why it does not."""
    last_position: int
    last_recorded_at: datetime | None


def verify_events(
    spark: SparkSession,
    source: str | Archive,
    registry: EventDecoder,
    *,
    partitions: int | None = None,
    keys: str | None = None,
) -> list[VerifiedTypeVersion]:
    """Every event of `source` (a store URL, read with its archive after retention, or an
    `Archive`) decoded by `registry` in Spark's executors: the counts by type and stored
    version, each with its first failure, sorted by type and version.

    Personal fields are opened with the key store at `keys`, as `read_events` opens them
    (by default a store's own).

    Example::

        # needs: spark
        from eventcraft.domain import EVENT_VERSION, DomainEvent, EventRegistry
        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections.spark import LOCAL_SETTINGS, spark_session, verify_events

        shop = EventRegistry()

        @shop.event("OrderPlaced", version=2)
        class OrderPlaced(DomainEvent):
            cents: int

        @shop.upcaster("OrderPlaced", from_version=1)
        def to_v2(data: dict) -> dict:
            return {"cents": data["euros"] * 100}

        with EventStore.open("sqlite:///shop.db") as store:
            store.append("order-1", [NewEvent("OrderPlaced", {"euros": 5}, {EVENT_VERSION: 1})])
            store.append("order-2", [NewEvent("OrderPlaced", {"euro": 5}, {EVENT_VERSION: 1})])
        spark = spark_session("local[2]", settings=LOCAL_SETTINGS)
        (counted,) = verify_events(spark, "sqlite:///shop.db", shop)
        assert (counted.events, counted.failed, counted.first_failure) == (2, 1, 2)
        assert "KeyError('euros')" in counted.error
    """
    if not callable(getattr(registry, "decode", None)):
        raise DefinitionError(f"registry must decode events (an EventRegistry), not {registry!r}")
    if isinstance(source, Archive):
        events = source.read(spark)
    elif isinstance(source, str):
        source = check_readable(source)
        events = read_whole_log(spark, source, upto=None, partitions=partitions).events
        keys = source if keys is None else keys
    else:
        raise DefinitionError(f"source is a store URL or an Archive, not {source!r}")
    events = opened(events, check_readable(keys) if keys is not None else None)
    decoded = events.mapInArrow(functools.partial(_decode, registry), _DECODED)
    failed = F.col("error").isNotNull()
    first = F.min(F.when(failed, F.struct("position", "error")))
    rows = (
        decoded.groupBy("type", "event_version")
        .agg(
            F.count(F.lit(1)).alias("events"),
            F.sum(failed.cast("long")).alias("failed"),
            first.alias("first"),
            F.max("position").alias("last_position"),
            F.max("recorded_at").alias("last_recorded_at"),
        )
        .orderBy("type", "event_version")
        .collect()
    )
    return [
        VerifiedTypeVersion(
            type=row["type"],
            event_version=int(row["event_version"]),
            events=int(row["events"]),
            failed=int(row["failed"]),
            first_failure=None if row["first"] is None else int(row["first"]["position"]),
            error=None if row["first"] is None else row["first"]["error"],
            last_position=int(row["last_position"]),
            last_recorded_at=row["last_recorded_at"],
        )
        for row in rows
    ]


def _decode(registry: EventDecoder, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Executor side: each event's type, stored version, position, time, and its error."""
    for batch in batches:
        versions: list[int] = []
        errors: list[str | None] = []
        for event in events_of(batch):
            versions.append(schema_version_of(event.metadata))
            try:
                registry.decode(event)
            except Exception as error:  # the registry's own errors are what is verified
                errors.append(str(error))
            else:
                errors.append(None)
        yield pa.RecordBatch.from_arrays(
            [
                batch.column("type"),
                pa.array(versions, pa.int64()),
                batch.column("position"),
                batch.column("recorded_at"),
                pa.array(errors, pa.string()),
            ],
            schema=pa.schema(
                [
                    ("type", pa.string()),
                    ("event_version", pa.int64()),
                    ("position", pa.int64()),
                    ("recorded_at", batch.schema.field("recorded_at").type),
                    ("error", pa.string()),
                ]
            ),
        )
