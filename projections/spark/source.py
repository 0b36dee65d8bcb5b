"""Where a replay reads the log from: the live store, or its Parquet archive.

Either way the log arrives as a DataFrame of `rows.EVENT_SCHEMA`, read by
the executors in parallel by global position range; no event passes
through the driver. A PostgreSQL store is read by Spark's JDBC source
where the session has the driver (`jdbc.py`); otherwise, and for SQLite,
through the store's public `read_all` in Python workers, one connection
per task. Either way only up to a high-water mark the driver fixed before
the job: below it the log can no longer change, so a task retried by
Spark reads exactly what the first attempt read.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator, Sequence

import pyarrow as pa
from eventcraft.eventstore import (
    EventStore,
    InvalidTenant,
    UnsupportedStoreURL,
    redacted,
    tenant_place,
)
from pyspark.sql import DataFrame, SparkSession

from ..errors import DefinitionError
from .jdbc import JDBC, read_jdbc, read_path
from .rows import EVENT_DDL, to_batch

_ROWS_PER_BATCH = 10_000
_EVENTS_PER_RANGE = 250_000
"""Big enough to amortise a connection, small enough to balance the cores."""


def check_readable(url: str) -> str:
    """`url` as the executors must be given it; refused if they could not reach it.

    Executors open the store themselves, in processes (and on machines) of
    their own: a relative SQLite path would name another file there, so it
    is made absolute here, against the driver's working directory. A tenant's
    URL (`?tenant=` in a template) is made its place's: the JDBC source and the
    read model's database would otherwise take the template's text for a name.
    """
    url = _placed(url)
    scheme = url.split("://", 1)[0].lower() if isinstance(url, str) and "://" in url else ""
    path, _, query = url[len(scheme) + len(":///") :].partition("?") if scheme else ("", "", "")
    in_memory = scheme == "sqlite" and (not path or path.startswith(":memory:"))
    if in_memory or scheme not in ("sqlite", "postgresql", "postgres", "postgresql+psycopg"):
        raise DefinitionError(
            f"Spark reads the log from its executors, which cannot see {url!r}: "
            "give a sqlite:/// or postgresql:// store URL"
        )
    if scheme == "sqlite" and not path.startswith("/"):
        return f"sqlite:///{os.path.abspath(path)}" + (f"?{query}" if query else "")
    return url


def _placed(url: str) -> str:
    """The URL of the tenant's place that `url` names, or `url` when it names no tenant."""
    if not isinstance(url, str):
        return url
    try:
        place = tenant_place(url)
    except (UnsupportedStoreURL, InvalidTenant) as error:
        if "{tenant}" in url and "tenant=" not in url.partition("?")[2]:
            raise DefinitionError(
                f"{redacted(url)!r} names a store per tenant with {{tenant}}: add "
                "?tenant=NAME to read one tenant, or give read_events tenants=[...] to read "
                "several, each row with its tenant"
            ) from None
        raise DefinitionError(str(error)) from None
    return url if place is None else place.url


def ranges(after: int, upto: int, parts: int) -> list[tuple[int, int]]:
    """(after, upto] cut into at most `parts` consecutive (lo, hi] ranges."""
    span = upto - after
    if span <= 0:
        return []
    parts = max(1, min(parts, span))
    step, extra = divmod(span, parts)
    bounds, lo = [], after
    for index in range(parts):
        hi = lo + step + (1 if index < extra else 0)
        bounds.append((lo, hi))
        lo = hi
    return bounds


def read_store(
    spark: SparkSession,
    url: str,
    *,
    after: int,
    upto: int,
    categories: Sequence[str] | None = None,
    types: Sequence[str] | None = None,
    partitions: int | None = None,
) -> DataFrame:
    """Events with `after < position <= upto`, read by the executors, one range a task.

    `upto` must be at most the store's high-water mark when the job starts.
    `read_path(spark, url)` says which way the rows come. `after` must be at least
    the store's low-water mark, which the callers have read (below it retention removed
    events: `whole_log.py` reads the archive there, an archive export refuses).
    """
    url = check_readable(url)
    if partitions is None:
        cores = spark.sparkContext.defaultParallelism
        partitions = max(cores, -(-(upto - after) // _EVENTS_PER_RANGE))
    bounds = ranges(after, upto, partitions)
    if not bounds:
        return spark.createDataFrame([], EVENT_DDL)
    if read_path(spark, url) == JDBC:
        return read_jdbc(
            spark,
            url,
            after=after,
            upto=upto,
            partitions=len(bounds),
            categories=categories,
            types=types,
        )
    read = functools.partial(
        _read_ranges,
        url,
        tuple(bounds),
        tuple(categories) if categories is not None else None,
        tuple(types) if types is not None else None,
    )
    # One range index per partition, so each range is one task.
    plan = spark.range(0, len(bounds), 1, numPartitions=len(bounds))
    return plan.mapInArrow(read, EVENT_DDL)


def _read_ranges(
    url: str,
    bounds: tuple[tuple[int, int], ...],
    categories: tuple[str, ...] | None,
    types: tuple[str, ...] | None,
    plans: Iterator[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """Executor side: the (lo, hi] ranges whose indexes `plans` holds, read with `read_all`.

    Sealed: personal fields stay in their envelopes, as the JDBC source reads
    them, so that an archive never holds them in the clear (`personal.py`).
    With `archive=True`: a retention run that committed after the driver read the
    low-water mark may have removed events of these ranges, which the store's read
    then takes from the archive (`eventstore/archive_reads.py`), never skips.
    """
    with EventStore.open(url, sealed=True, archive=True) as store:
        for plan in plans:
            for index in plan.column("id").to_pylist():
                lo, hi = bounds[index]
                chunk = []
                # Positions may have gaps (rolled-back appends), so hi - lo bounds
                # the count; the position check ends the range.
                for event in store.read_all(
                    after=lo, limit=hi - lo, categories=categories, types=types
                ):
                    if event.position > hi:
                        break
                    chunk.append(event)
                    if len(chunk) == _ROWS_PER_BATCH:
                        yield to_batch(chunk)
                        chunk = []
                if chunk:
                    yield to_batch(chunk)
