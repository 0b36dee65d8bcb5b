"""A Parquet archive of the log, extended by export runs, read by replays.

The archive is a directory of segments, each one export run:
`from-<first position>-to-<last position>/`, Parquet files of
`rows.EVENT_SCHEMA` (zstd). Spark writes a segment's `_SUCCESS` marker
when its job commits; a segment without one is what a crashed export left
and is ignored, then removed by the next export. Committed segments chain
without gap or overlap from position 1, which the reader checks.

Unless the archive is told otherwise, a segment also holds `data_variant`:
each event's data parsed once, at export, as a VARIANT, which Spark shreds
into typed columns. A reducer fold then reads the fields it sums from
there, as plain Parquet columns, instead of parsing every event's JSON on
every replay. A segment holds the column for all its events or is read as
if it had none (the `_DATA_VARIANT` marker says which); segments without it
(written without Spark, by an earlier release, with `parsed=False`, or
holding data too large for a variant) have their data parsed as they are
read.

Paths go through Hadoop's FileSystem API, so the archive may live on any
filesystem the cluster mounts (file:, hdfs:, s3a:).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Any

from eventcraft.eventstore import EventStore, segment_name
from eventcraft.eventstore import archive_chain_break as chain_break
from eventcraft.eventstore import segment_span as span_of
from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from .. import telemetry
from ..archive_files import ArchiveBroken
from .jdbc import read_path
from .rows import EVENT_DDL
from .source import check_readable, read_store


class ArchiveError(ArchiveBroken):
    """The archive's segments do not make one log (overlap or gap), or it is not there, or
    it is not the store's. An `ArchiveBroken`, as the in-process readers raise: one
    `except` catches an archive refused by either.

    Example::

        # needs: spark
        from eventcraft.projections.spark import (
            LOCAL_SETTINGS, Archive, ArchiveError, spark_session,
        )

        spark = spark_session("local[2]", settings=LOCAL_SETTINGS)
        try:
            Archive("/mnt/archive-not-mounted").read(spark)
        except ArchiveError as error:  # never read as an empty log
            assert "the archive folder /mnt/archive-not-mounted is missing" in str(error)
    """


@dataclass(frozen=True)
class Segment:
    """One Parquet file of the archive, holding the events at positions `first` to `last`.

    Example::

        # needs: spark
        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections.spark import LOCAL_SETTINGS, Archive, spark_session

        url = "sqlite:///bank.db"
        spark = spark_session("local[2]", settings=LOCAL_SETTINGS)
        archive = Archive("archive")
        with EventStore.open(url) as store:
            for cents in (100, 250):  # two exports: two segments
                store.append("account-1", [NewEvent("Deposited", {"cents": cents})])
                archive.export(spark, url)
        segments = archive.segments(spark)
        assert [(segment.first, segment.last) for segment in segments] == [(1, 1), (2, 2)]
        assert segments[0].path.endswith("from-000000000000001-to-000000000000001")
        assert all(segment.parsed for segment in segments)  # data parsed too, for reducer folds
    """

    first: int
    last: int
    path: str
    parsed: bool = False
    """Whether its events' data is also stored parsed, in `data_variant`."""


@dataclass(frozen=True)
class ExportReport:
    """What one export wrote into the archive.

    Example::

        # needs: spark
        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections.spark import (
            LOCAL_SETTINGS, Archive, ExportReport, spark_session,
        )

        url = "sqlite:///bank.db"
        spark = spark_session("local[2]", settings=LOCAL_SETTINGS)
        archive = Archive("archive")
        with EventStore.open(url) as store:
            store.append("account-1", [NewEvent("Deposited", {"cents": 100})])
            first: ExportReport = archive.export(spark, url)
            store.append("account-1", [NewEvent("Deposited", {"cents": 250})])
            second = archive.export(spark, url)  # a nightly job: what is new since the last
        assert (first.after, first.upto, first.events) == (0, 1, 1)
        assert (second.after, second.upto, second.events, second.read_path) == (1, 2, 1, "python")
    """

    path: str
    after: int
    """The archive's last position before this export."""
    upto: int
    """Its last position now."""
    events: int
    """Events this export wrote."""
    read_path: str = "python"
    """How the store was read: "jdbc" (the JVM) or "python" (workers' `read_all`)."""


DATA_VARIANT = "data_variant"
"""The column of a segment that holds each event's data parsed (a VARIANT)."""
PARSED_MARK = "_DATA_VARIANT"
"""The file in a segment whose every event has its data in `data_variant`."""


class Archive:
    """The Parquet archive at `path` (a local path or any Hadoop filesystem URL).

    `parsed=False` exports segments without the `data_variant` column, for an archive
    that reducer folds do not replay: smaller by what the column takes, which depends on
    the data (1% of the benchmark's log, whose values repeat).

    Example::

        # needs: spark
        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections.spark import LOCAL_SETTINGS, Archive, spark_session

        with EventStore.open("sqlite:///bank.db") as store:
            store.append("account-1", [NewEvent("Deposited", {"cents": n}) for n in (100, 250)])
        spark = spark_session("local[2]", settings=LOCAL_SETTINGS)
        archive = Archive("archive")  # or hdfs:///..., s3a://...
        assert archive.export(spark, "sqlite:///bank.db").events == 2  # everything new
        assert archive.last_position(spark) == 2
        assert [row.position for row in archive.read(spark, after=1).collect()] == [2]
    """

    def __init__(self, path: str, *, parsed: bool = True) -> None:
        if not isinstance(path, str) or not path:
            raise ArchiveError(f"an archive path is a non-empty string, not {path!r}")
        self.parsed = parsed
        # Spark resolves a relative path against the JVM's directory, which
        # need not be ours: a plain path is made absolute here.
        plain = "://" not in path and not path.startswith("file:")
        self.path = os.path.abspath(path) if plain else path.rstrip("/")

    def __repr__(self) -> str:
        return f"Archive({self.path!r})"

    def segments(self, spark: SparkSession) -> list[Segment]:
        """The committed segments in position order, checked to chain from position 1."""
        found = sorted(
            (segment for segment, committed in self._listing(spark) if committed),
            key=lambda segment: segment.first,
        )
        broken = chain_break((segment.first, segment.last) for segment in found)
        if broken:
            raise ArchiveError(f"{self.path}: {broken}")
        return found

    def last_position(self, spark: SparkSession) -> int:
        """The highest position the archive holds; 0 when it is empty."""
        segments = self.segments(spark)
        return segments[-1].last if segments else 0

    def read(self, spark: SparkSession, *, after: int = 0, parsed: bool = False) -> DataFrame:
        """The archived events with position > `after`, as a DataFrame of the event schema.

        `parsed` adds the `data_variant` column: the data as a variant, read where a
        segment holds it, parsed from the JSON where it does not.
        """
        filesystem, root = _filesystem(spark, self.path)
        if not filesystem.exists(root):
            # Read as empty, a folder not mounted or moved would lose every event it holds.
            raise ArchiveError(
                f"the archive folder {self.path} is missing: make it reachable here (it is "
                "not mounted, or was moved) before reading from it"
            )
        segments = [s for s in self.segments(spark) if s.last > after]
        variant = f"{EVENT_DDL}, {DATA_VARIANT} variant"
        if not segments:
            return spark.createDataFrame([], variant if parsed else EVENT_DDL)
        stored = [s.path for s in segments if s.parsed and parsed]
        rest = [s.path for s in segments if not (s.parsed and parsed)]
        frames = []
        if stored:
            frames.append(spark.read.schema(variant).parquet(*stored))
        if rest:
            frame = spark.read.schema(EVENT_DDL).parquet(*rest)
            frames.append(frame.withColumn(DATA_VARIANT, F.parse_json("data")) if parsed else frame)
        frame = functools.reduce(DataFrame.unionByName, frames)
        # A segment written before events had tags has no such column: none, as the store says.
        frame = frame.withColumn("tags", F.coalesce("tags", F.array().cast("array<string>")))
        return frame.where(frame.position > after) if after else frame

    def export(self, spark: SparkSession, store_url: str) -> ExportReport:
        """Append the store's events since the last export as a new segment.

        Runs read the store up to its high-water mark, so a segment never
        misses an event that commits later with a lower position. Two
        exports must not run at once: the second's segment would overlap
        the first's, and readers refuse an archive that overlaps.
        """
        store_url = check_readable(store_url)
        with telemetry.spark_run("export", self.path) as run:
            report = self._export(spark, store_url)
            run.finished(read_path=report.read_path, events=report.events, exported_to=report.upto)
        return report

    def _export(self, spark: SparkSession, store_url: str) -> ExportReport:
        self._remove_uncommitted(spark)
        after = self.last_position(spark)
        with EventStore.open(store_url) as store:
            upto = store.high_water_mark()
            mark = store.low_water_mark()
        if after < mark:
            # Retention removed events up to the mark: only the archive it wrote has them.
            raise ArchiveError(
                f"{self.path} ends at position {after}, but the store's log begins to be whole "
                f"after {mark}, where retention removed events: extend the archive its runs "
                "wrote instead"
            )
        path = read_path(spark, store_url)
        if upto <= after:
            return ExportReport(self.path, after, after, 0, path)
        events = read_store(spark, store_url, after=after, upto=upto)
        counts = [F.count(F.lit(1)).alias("events")]
        if self.parsed:
            # try_: data too large for a variant leaves the segment unmarked, not failed.
            events = events.withColumn(DATA_VARIANT, F.try_parse_json("data"))
            counts.append(F.count(DATA_VARIANT).alias("parsed"))
        observation = Observation("archive-export")
        events = events.observe(observation, *counts)
        target = f"{self.path}/{segment_name(after + 1, upto)}"
        # Microsecond timestamps, not Spark's legacy INT96: any Parquet reader can read them.
        setting = "spark.sql.parquet.outputTimestampType"
        before = spark.conf.get(setting, None)
        spark.conf.set(setting, "TIMESTAMP_MICROS")
        try:
            events.write.mode("errorifexists").option("compression", "zstd").parquet(target)
        finally:
            if before is None:
                spark.conf.unset(setting)
            else:
                spark.conf.set(setting, before)
        totals = observation.get
        written = int(totals["events"])
        if self.parsed and totals["parsed"] == written:
            # After the commit: a crash in between leaves a segment that is parsed as read.
            filesystem, _ = _filesystem(spark, target)
            filesystem.create(_hadoop_path(spark, f"{target}/{PARSED_MARK}")).close()
        return ExportReport(self.path, after, upto, written, path)

    def _listing(self, spark: SparkSession) -> list[tuple[Segment, bool]]:
        filesystem, root = _filesystem(spark, self.path)
        if not filesystem.exists(root):
            return []
        # Every segment's markers in one call, not one call per segment and marker. (The
        # path is a glob here, as it is to Spark's Parquet reader.)
        markers = f"{self.path}/*/{{_SUCCESS,{PARSED_MARK}}}"
        found = filesystem.globStatus(_hadoop_path(spark, markers))
        marked = {(m.getPath().getParent().getName(), m.getPath().getName()) for m in found or []}
        listed = []
        for status in filesystem.listStatus(root):
            name = status.getPath().getName()
            span = span_of(name)
            if not status.isDirectory() or span is None:
                continue
            committed = (name, "_SUCCESS") in marked
            parsed = committed and (name, PARSED_MARK) in marked
            segment = Segment(*span, status.getPath().toString(), parsed)
            listed.append((segment, committed))
        return listed

    def _remove_uncommitted(self, spark: SparkSession) -> None:
        filesystem, _ = _filesystem(spark, self.path)
        for segment, committed in self._listing(spark):
            if not committed:
                filesystem.delete(_hadoop_path(spark, segment.path), True)


def _hadoop_path(spark: SparkSession, path: str) -> Any:
    jvm: Any = spark._jvm
    return jvm.org.apache.hadoop.fs.Path(path)


def _filesystem(spark: SparkSession, path: str) -> tuple[Any, Any]:
    hadoop_path = _hadoop_path(spark, path)
    configuration = spark._jsc.hadoopConfiguration()
    return hadoop_path.getFileSystem(configuration), hadoop_path
