"""The log as a DataFrame, for data engineers' own questions of the whole history."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence

import pyarrow as pa
from eventcraft.eventstore import InvalidTenant, check_tenant
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..errors import DefinitionError
from .archive import Archive
from .personal import opened
from .rows import events_of
from .source import check_readable
from .typed import EventTypes, struct_of
from .whole_log import read_whole_log

_TYPED = "_typed"


def read_events(
    spark: SparkSession,
    source: str | Archive,
    *,
    registry: EventTypes | None = None,
    partitions: int | None = None,
    keys: str | None = None,
    tenants: Sequence[str] | None = None,
) -> DataFrame:
    """Every event of `source` (a store URL or an `Archive`), one row each.

    Columns: position, stream_id, category, version, type, id, data and
    metadata (JSON text), correlation_id, causation_id, recorded_at, tags
    (an array of strings, sorted, empty when the event has none). With
    a `registry` (a `domain.EventRegistry`), each registered type also gets
    a struct column named after it, holding the event's data decoded and
    upcast to the current version (null on rows of other types).

    A store is read up to its high-water mark as the call finds it; after retention,
    from its archive up to the low-water mark and from the store after it
    (`ArchiveBroken` if the archive is missing or ends short of the mark).
    Personal fields are opened with the key store at `keys`: by default the
    store's own database; an archive's are opened only if `keys` names its
    store's (a sealed event fails the job otherwise).

    A tenant's store is read by its URL (`?tenant=acme` in a template with
    `{tenant}`). With `tenants`, `source` is the template and the rows are those
    of every tenant named, each tenant's log read from its own place, with a
    first column `tenant` (positions are each tenant's own).

    Example::

        # needs: spark
        from eventcraft.domain import DomainEvent, EventRegistry
        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections.spark import LOCAL_SETTINGS, read_events, spark_session

        bank_events = EventRegistry()

        @bank_events.event("MoneyDeposited")
        class MoneyDeposited(DomainEvent):
            amount_cents: int

        with EventStore.open("sqlite:///bank.db") as store:
            deposits = [NewEvent("MoneyDeposited", {"amount_cents": n}) for n in (100, 250)]
            store.append("account-1", deposits)
            store.append("account-1", [NewEvent("AccountClosed", {})])
        spark = spark_session("local[2]", settings=LOCAL_SETTINGS)
        events = read_events(spark, "sqlite:///bank.db", registry=bank_events)  # or an Archive
        totals = events.where("type = 'MoneyDeposited'").groupBy("category").sum(
            "MoneyDeposited.amount_cents"
        )
        assert [tuple(row) for row in totals.collect()] == [("account", 350)]
    """
    if tenants is not None:
        return _of_tenants(spark, source, tenants, registry, partitions)
    if isinstance(source, Archive):
        events = source.read(spark)
    elif isinstance(source, str):
        source = check_readable(source)
        # After retention, the archive below the mark, then the store: the whole log.
        events = read_whole_log(spark, source, upto=None, partitions=partitions).events
        keys = source if keys is None else keys
    else:
        raise DefinitionError(f"source is a store URL or an Archive, not {source!r}")
    events = opened(events, check_readable(keys) if keys is not None else None)
    metadata = F.col("metadata")
    events = events.select(
        "position",
        "stream_id",
        F.substring_index("stream_id", "-", 1).alias("category"),
        "version",
        "type",
        "id",
        "data",
        "metadata",
        F.get_json_object(metadata, "$.correlation_id").alias("correlation_id"),
        F.get_json_object(metadata, "$.causation_id").alias("causation_id"),
        "recorded_at",
        "tags",
    )
    if registry is None:
        return events
    return _with_typed_columns(events, registry)


def _of_tenants(
    spark: SparkSession,
    template: str | Archive,
    tenants: Sequence[str],
    registry: EventTypes | None,
    partitions: int | None,
) -> DataFrame:
    """Each of `tenants`' events, read from its place, with its tenant first."""
    if isinstance(tenants, str) or not tenants:
        raise DefinitionError(f"tenants is a list of tenant ids, not {tenants!r}")
    if not isinstance(template, str) or "{tenant}" not in template:
        raise DefinitionError(
            f"tenants= reads each tenant from its place: the source must be a store URL "
            f"naming it with {{tenant}}, not {template!r}"
        )
    for tenant in tenants:
        try:
            check_tenant(tenant)  # before it goes into a URL, where `&` would add an option
        except InvalidTenant as error:
            raise DefinitionError(str(error)) from None
    separator = "&" if "?" in template else "?"
    frames = [
        read_events(
            spark,
            f"{template}{separator}tenant={tenant}",
            registry=registry,
            partitions=partitions,
        ).select(F.lit(tenant).alias("tenant"), "*")
        for tenant in tenants
    ]
    return functools.reduce(DataFrame.unionByName, frames)


def _with_typed_columns(events: DataFrame, registry: EventTypes) -> DataFrame:
    names = sorted(registry.types)
    clashes = set(names) & set(events.columns)
    if clashes:
        raise DefinitionError(f"event types {sorted(clashes)} would replace the log's own columns")
    decoded = events.mapInArrow(
        functools.partial(_decode, registry, frozenset(names)),
        T.StructType([*events.schema.fields, T.StructField(_TYPED, T.StringType())]),
    )
    typed = [
        F.when(
            F.col("type") == name, F.from_json(_TYPED, struct_of(registry.types[name].cls))
        ).alias(name)
        for name in names
    ]
    return decoded.select(*events.columns, *typed)


def _decode(
    registry: EventTypes, names: frozenset[str], batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Executor side: each registered event's data as its current class writes it."""
    for batch in batches:
        typed = [
            registry.decode(event).model_dump_json() if event.type in names else None
            for event in events_of(batch)
        ]
        yield batch.append_column(_TYPED, pa.array(typed, pa.string()))
