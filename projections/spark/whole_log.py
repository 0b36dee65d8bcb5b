"""The whole log for Spark when retention has run: the archive up to the store's
low-water mark, then the store after it (`projections/log_start.py` does the same for
the in-process runner). Below the mark the store has holes; the archive has none."""

from __future__ import annotations

from collections.abc import Sequence

from eventcraft.eventstore import EventStore
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from .archive import Archive
from .jdbc import read_path
from .source import read_store


def read_whole_log(
    spark: SparkSession,
    url: str,
    *,
    upto: int,
    categories: Sequence[str] | None = None,
    types: Sequence[str] | None = None,
    partitions: int | None = None,
) -> tuple[DataFrame, str]:
    """Events with position <= `upto` from the archive and the store, and how they were
    read ("jdbc" or "python", "archive+" before it when the archive was read too)."""
    with EventStore.open(url) as store:
        mark = min(store.low_water_mark(), upto)
        runs = store.retention.runs() if mark else []
    path = read_path(spark, url)
    live = read_store(
        spark, url, after=mark, upto=upto, categories=categories, types=types, partitions=partitions
    )
    if not mark:
        return live, path
    archived = Archive(runs[-1].archive).read(spark)
    archived = archived.where(archived.position <= mark)
    if categories is not None:
        archived = archived.where(F.substring_index("stream_id", "-", 1).isin(list(categories)))
    if types is not None:
        archived = archived.where(archived.type.isin(list(types)))
    return archived.unionByName(live), f"archive+{path}"
