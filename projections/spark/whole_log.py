"""The whole log for Spark when retention has run: the archive up to the store's
low-water mark, then the store after it (`projections/log_start.py` does the same for
the in-process runner). Below the mark the store has holes; the archive has none. The
archive is checked by the in-process readers' own check (`log_start.archive_below`), so
one that is missing or ends below the mark raises the same `ArchiveBroken` here.

A run that commits while the job reads removes rows the driver's mark said were in the
store. Python workers read with `archive=True` and take those from the archive; the JDBC
source cannot, so a replay checks the mark after its job (`replay.py`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from eventcraft.eventstore import EventStore
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ..fold_keys import StreamKey
from ..log_start import archive_below
from .archive import Archive
from .jdbc import JDBC, MOST_KEYED_TASKS, read_jdbc_by_key, read_path
from .source import read_store


class WholeLog(NamedTuple):
    events: DataFrame
    path: str
    """How it was read: "jdbc" or "python", "archive+" before it when the archive was too."""
    by_key: bool
    """Each partition holds every event of its keys (`read_jdbc_by_key`)."""
    mark: int = 0
    """The low-water mark the store was read above (the archive read up to it)."""


def read_whole_log(
    spark: SparkSession,
    url: str,
    *,
    upto: int | None,
    categories: Sequence[str] | None = None,
    types: Sequence[str] | None = None,
    partitions: int | None = None,
    key: StreamKey | None = None,
) -> WholeLog:
    """Events with position <= `upto` (the high-water mark for None) from the archive and
    the store.

    With `key`, read by that key where that pays: through the JDBC source, in
    at most `MOST_KEYED_TASKS` tasks, and with no archive to read.
    """
    with EventStore.open(url) as store:
        if upto is None:
            upto = store.high_water_mark()
        mark = min(store.low_water_mark(), upto)
        # Checked before a job is planned: read as it is, a missing or short archive gives
        # fewer events, and the replay a wrong read model, without a word.
        archive = str(archive_below(store, mark).path) if mark else None
    path = read_path(spark, url)
    tasks = partitions or spark.sparkContext.defaultParallelism
    if key is not None and not mark and path == JDBC and tasks <= MOST_KEYED_TASKS:
        keyed = read_jdbc_by_key(
            spark,
            url,
            after=0,
            upto=upto,
            tasks=tasks,
            prefix=key.prefix,
            categories=categories,
            types=types,
        )
        return WholeLog(keyed, path, by_key=True)
    live = read_store(
        spark, url, after=mark, upto=upto, categories=categories, types=types, partitions=partitions
    )
    if archive is None:
        return WholeLog(live, path, by_key=False, mark=mark)
    archived = Archive(archive).read(spark)
    archived = archived.where(archived.position <= mark)
    if categories is not None:
        archived = archived.where(F.substring_index("stream_id", "-", 1).isin(list(categories)))
    if types is not None:
        archived = archived.where(archived.type.isin(list(types)))
    return WholeLog(archived.unionByName(live), f"archive+{path}", by_key=False, mark=mark)
