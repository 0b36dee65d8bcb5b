"""Rebuild a fold's read model from the whole log as a Spark job, then swap it in.

The job: the log as a DataFrame (read by the executors from the store or
the archive, up to a fixed position H), each event keyed by the fold's
`key`, `repartition(key)` and `sortWithinPartitions(key, position)` so
each task holds whole keys in log order, then the fold's `apply` run per
key in `mapInArrow`, each task inserting its rows into a new generation
of the read model (`folding.py`). The driver only sees one count per task.
A fold keyed by stream can skip the shuffle: its few tasks each read their
keys' events whole from PostgreSQL (`jdbc.read_jdbc_by_key`).

The new generation is then swapped in with the checkpoint set to H, in
the same transaction that catches up with any live projector that moved
beyond H meanwhile (`projections/swap.py`): the incremental runner carries
on from there, missing and repeating nothing, however long the job took
and however many writers appended while it ran.
"""

from __future__ import annotations

import functools
import re
import time
from dataclasses import dataclass
from typing import Any

from eventcraft.eventstore import EventStore
from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]
from pyspark.errors import PythonException
from pyspark.errors.exceptions.captured import CapturedException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from .. import telemetry
from ..definition import Definition
from ..errors import DefinitionError, ProjectionError
from ..fold import Fold
from ..fold_keys import StreamKey
from ..reducers import ReducerFold
from ..runner import ProjectionRunner
from ..swap import new_generation, swap_in
from .aggregate import aggregated, write
from .archive import Archive, ArchiveError
from .folding import KEYED_DDL, WRITTEN_DDL, FoldTask, fold_and_write, keyed
from .jdbc import JDBC
from .personal import opened
from .progress import stage_progress
from .rows import EVENT_DDL
from .source import check_readable
from .whole_log import read_whole_log

_SWAP_BATCH = 10_000
_ATTEMPTS = 3
"""Replays begun before one gives up on retention runs that keep moving the mark."""


class ReplayOutrun(ProjectionError):
    """A retention run moved the low-water mark while the JDBC source read the store: the
    job may have missed what it removed; nothing was swapped in, and `replay` tries again
    (the next job reads those events from the archive)."""


@dataclass(frozen=True)
class ReplayReport:
    """What a Spark replay did: the generation it built and swapped in, and up to where.

    Example::

        # needs: spark
        import sqlalchemy as sa
        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections import ReducerFold, StreamKey
        from eventcraft.projections.reducers import Sum
        from eventcraft.projections.spark import LOCAL_SETTINGS, ReplayReport, replay, spark_session

        totals = sa.Table("totals", sa.MetaData(), sa.Column("account", sa.Text, primary_key=True),
                          sa.Column("deposited", sa.BigInteger, nullable=False))
        fold = ReducerFold("totals", table=totals, key=StreamKey("account-"),
                           columns={"deposited": Sum("cents", types="Deposited")})
        with EventStore.open("sqlite:///bank.db") as store:
            store.append("account-1", [NewEvent("Deposited", {"cents": n}) for n in (100, 250)])
        spark = spark_session("local[2]", settings=LOCAL_SETTINGS)
        report: ReplayReport = replay(fold, "sqlite:///bank.db", spark=spark)
        assert (report.generation, report.replayed_to, report.position) == (2, 2, 2)
        assert (report.events, report.rows, report.caught_up) == (2, 1, 0)
        assert report.read_path == "python"  # SQLite, read by Python workers
    """

    name: str
    generation: int
    """The generation now serving."""
    replayed_to: int
    """H: the last position the Spark job read."""
    position: int
    """The checkpoint the swap set: H, or where a live projector had got beyond it."""
    events: int
    """Events the job folded."""
    rows: int
    """Rows it wrote."""
    caught_up: int
    """Events applied in the swap, beyond H."""
    seconds: float
    read_path: str = "python"
    """How the log was read: "jdbc" (the JVM), "python" (workers' `read_all`) or "archive";
    "archive+jdbc" or "archive+python" after retention: the archive below its mark."""
    by_key: bool = False
    """Each task read every event of its keys from the store (a fold keyed by stream,
    through JDBC, in few tasks): the job moved no event between tasks."""


def replay(
    fold: Definition,
    store_url: str,
    *,
    spark: SparkSession,
    source: Archive | None = None,
    database: str | None = None,
    partitions: int | None = None,
    progress: bool = False,
    keys: str | None = None,
) -> ReplayReport:
    """Rebuild `fold`'s read model in Spark from `source` (the store itself by default).

    `database` is the read model's database URL when it is not the
    store's; the executors connect to it, so it must be one they reach.
    `partitions` is how many tasks fold and write (the cores by default).
    `keys` is the URL of the store's key store when it is not the store's
    own database: personal fields are opened with it as the events are read.

    After retention, the store is read from its archive up to the low-water mark.
    A retention run that moves the mark while the job reads is read from the archive
    by Python workers; under the JDBC source the replay swaps nothing in and runs
    again (`ReplayOutrun`, a `ProjectionError`, after 3 jobs outrun).

    Example::

        # needs: spark
        import sqlalchemy as sa
        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections import Fold, ProjectionRunner, StreamKey
        from eventcraft.projections.spark import LOCAL_SETTINGS, replay, spark_session

        balances = sa.Table(
            "balances", sa.MetaData(),
            sa.Column("account", sa.Text, primary_key=True),
            sa.Column("cents", sa.BigInteger, nullable=False),
        )
        by_account = Fold(
            "balances", table=balances, types=["Deposited"], key=StreamKey("account-"),
            initial=lambda key: {"account": key, "cents": 0},
            apply=lambda row, event: {**row, "cents": row["cents"] + event.data["cents"]},
        )
        store = EventStore.open("sqlite:///bank.db")
        for n in range(4):
            store.append(f"account-{n % 2}", [NewEvent("Deposited", {"cents": 100 * n})])
        spark = spark_session("local[2]", settings=LOCAL_SETTINGS)
        report = replay(by_account, "sqlite:///bank.db", spark=spark)  # or source=Archive(...)
        assert (report.events, report.rows, report.position) == (4, 2, 4)
        with ProjectionRunner(store, [by_account]) as runner:  # on from the replay's checkpoint
            with runner.database.reading() as connection:
                assert connection.execute(sa.select(balances).order_by("account")).all() == [
                    ("0", 200), ("1", 400)]
        store.close()
    """
    if not isinstance(fold, Fold):
        raise DefinitionError(
            f"{fold!r}: a Spark replay runs a Fold (key, initial, apply); "
            "handler projections are rebuilt in process with ProjectionRunner.rebuild"
        )
    store_url = check_readable(store_url)
    database_url = check_readable(database) if database is not None else store_url
    if source is not None and not isinstance(source, Archive):
        raise DefinitionError(f"source is an Archive or None (the store), not {source!r}")
    with telemetry.spark_run("replay", fold.name) as run:
        keys_url = check_readable(keys) if keys is not None else store_url
        for attempt in range(1, _ATTEMPTS + 1):
            try:
                report = _replay(
                    fold, store_url, database_url, keys_url, spark, source, partitions, progress
                )
                break
            except ReplayOutrun:
                if attempt == _ATTEMPTS:
                    raise
        run.finished(
            read_path=report.read_path,
            events=report.events,
            rows=report.rows,
            replayed_to=report.replayed_to,
            generation=report.generation,
        )
    return report


def _replay(
    fold: Fold,
    store_url: str,
    database_url: str,
    keys_url: str,
    spark: SparkSession,
    source: Archive | None,
    partitions: int | None,
    progress: bool,
) -> ReplayReport:
    started = time.perf_counter()
    tasks = partitions or spark.sparkContext.defaultParallelism
    with (
        EventStore.open(store_url) as store,
        ProjectionRunner(store, [fold], database=database_url, lease_ttl=None) as runner,
        new_generation(runner.database, fold) as (generation, tables),
    ):
        head = store.high_water_mark()
        if source is None:
            upto = head
            # Below a retention run's mark, from the archive: the store has holes there.
            # A Python fold keyed by stream can read whole keys, and need no shuffle (a
            # reducer fold's aggregation would shuffle anyway).
            python_fold = not isinstance(fold, ReducerFold)
            key = fold.key if python_fold and isinstance(fold.key, StreamKey) else None
            whole = read_whole_log(
                spark,
                store_url,
                upto=upto,
                categories=fold.categories,
                types=fold.types,
                partitions=partitions,
                key=key,
            )
            events, path, by_key = whole.events, whole.path, whole.by_key
        else:
            upto = source.last_position(spark)
            if upto > head:
                raise ArchiveError(
                    f"{source.path} holds events up to position {upto}, but the store "
                    f"{store!r} ends at {head}: it is not an archive of this store"
                )
            # A reducer fold keyed in the JVM reads the data the archive holds parsed; a key
            # function's Python worker takes and gives events of the event schema alone.
            parsed = isinstance(fold, ReducerFold) and isinstance(fold.key, StreamKey)
            events = _selected(source.read(spark, parsed=parsed), fold)
            path, by_key = "archive", False
        if fold.query is not None:
            events = _matching(events, fold)
        events = opened(events, keys_url)
        task = FoldTask.of(fold, tables[fold.table.fullname], database_url)
        stages = ("read and key events", "fold and write rows")
        with stage_progress(spark, progress, f"replay {fold.name}", stages):
            try:
                if isinstance(fold, ReducerFold):
                    table = task.table
                    name = runner.database.engine.dialect.identifier_preparer.format_table(table)
                    rows = aggregated(_keyed(events, fold, task), fold)
                    folded, count = write(spark, rows, fold, task, name)
                else:
                    written = _fold_job(events, fold, task, tasks, by_key).collect()
                    folded = sum(row["events"] for row in written)
                    count = sum(row["rows"] for row in written)
            except PythonException as error:
                # The executor's traceback is the useful part; Spark's wrapping is not.
                raise ReplayFailed.of(fold.name, error) from error
            except (CapturedException, Py4JJavaError) as error:
                # Failed in the JVM: a SQL aggregation (an overflowing Sum), a JDBC write.
                raise ReplayFailed.of_jvm(fold.name, error) from error
        if source is None and path.endswith(JDBC) and whole.mark < upto:
            # The JDBC source read the store above the mark the driver read: a retention
            # run that committed meanwhile removed rows it may have read as missing, which
            # (unlike the Python workers' reads) it cannot take from the archive.
            moved = store.low_water_mark()
            if moved > whole.mark:
                raise ReplayOutrun(
                    f"replay of {fold.name!r}: a retention run moved the low-water mark from "
                    f"{whole.mark} to {moved} while the JDBC source read the store: nothing "
                    "was swapped in"
                )
        position, caught_up = swap_in(
            store, runner.database, fold, generation, upto, batch_size=_SWAP_BATCH
        )
    return ReplayReport(
        name=fold.name,
        generation=generation,
        replayed_to=upto,
        position=position,
        events=folded,
        rows=count,
        caught_up=caught_up,
        seconds=time.perf_counter() - started,
        read_path=path,
        by_key=by_key,
    )


class ReplayFailed(ProjectionError):
    """The fold's own code (or the read model's database) failed on an executor.

    Nothing was swapped in: the old read model keeps serving.

    Example::

        # needs: spark
        import sqlalchemy as sa
        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections import Fold, StreamKey
        from eventcraft.projections.spark import LOCAL_SETTINGS, ReplayFailed, replay, spark_session

        totals = sa.Table("totals", sa.MetaData(), sa.Column("order_id", sa.Text, primary_key=True),
                          sa.Column("cents", sa.BigInteger, nullable=False))
        order_totals = Fold("order-totals", table=totals, key=StreamKey("order-"),
                            initial=lambda key: {"order_id": key, "cents": 0},
                            apply=lambda row, event: {**row, "cents": event.data["cents"]})
        with EventStore.open("sqlite:///shop.db") as store:
            store.append("order-1", [NewEvent("OrderPlaced", {"cents": 900})])
            store.append("order-2", [NewEvent("OrderPlaced", {"amount": 400})])  # an old shape
        spark = spark_session("local[2]", settings=LOCAL_SETTINGS)
        try:
            replay(order_totals, "sqlite:///shop.db", spark=spark)
        except ReplayFailed as failed:  # nothing swapped in: the old read model keeps serving
            assert (failed.error_type, failed.message) == ("KeyError", "'cents'")
            assert failed.position == 2  # the event it was folding
    """

    def __init__(
        self, name: str, error_type: str, message: str, position: int | None = None
    ) -> None:
        at = f" at position {position}" if position is not None else ""
        super().__init__(f"replay of {name!r} failed on an executor{at}: {error_type}: {message}")
        self.name = name
        """The fold's name."""
        self.error_type = error_type
        """The executor's exception type, unqualified (`IntegrityError`)."""
        self.message = message
        """The first line of its message, without a driver's `(module.Type)` prefix."""
        self.position = position
        """The event being folded or keyed when it was raised, when it was an event's."""
        self.cause = f"{error_type}: {message}"

    @classmethod
    def of(cls, name: str, error: PythonException) -> ReplayFailed:
        return cls(name, *_executor_error(str(error)), _failed_at(name, str(error)))

    @classmethod
    def of_jvm(cls, name: str, error: CapturedException | Py4JJavaError) -> ReplayFailed:
        """The JVM exception at the root of `error`: its class's simple name, its message."""
        if isinstance(error, Py4JJavaError):
            root: Any = error.java_exception
            while root.getCause() is not None:
                root = root.getCause()
            error_type, message = str(root.getClass().getSimpleName()), str(root.getMessage())
        else:
            error_type, message = type(error).__name__, str(error)
        lines = [line.strip() for line in message.splitlines() if line.strip()]
        return cls(name, error_type, lines[0] if lines else "(no message)")


_TRACEBACK = "Traceback (most recent call last):"
_DRIVER_PREFIX = re.compile(r"^\((?:\w+\.)*\w+\)\s*")


def _executor_error(text: str) -> tuple[str, str]:
    """The type and first message line of the exception the executor raised.

    The raised exception is the one after the last traceback header (chained
    causes come before it); its message may run on over lines such as
    SQLAlchemy's `[SQL: …]` and `(Background on this error at: …)`.
    """
    text = text.split("JVM stacktrace:", 1)[0]
    lines = text.splitlines()
    starts = [n for n, line in enumerate(lines) if line.strip() == _TRACEBACK]
    for line in lines[starts[-1] + 1 :] if starts else []:
        if not line.strip() or line[0].isspace():
            continue
        qualified, _, message = line.partition(": ")
        error_type = qualified.rsplit(".", 1)[-1].strip()
        return error_type, _DRIVER_PREFIX.sub("", message.strip())
    meaningful = [line.strip() for line in lines if line.strip()]
    return "PythonException", meaningful[0] if meaningful else "(no message)"


def _failed_at(name: str, text: str) -> int | None:
    """The position `note_failure` wrote into the traceback, if it did."""
    found = re.search(
        rf"^{re.escape(name)}: raised for the event at position (\d+)", text, re.MULTILINE
    )
    return int(found.group(1)) if found else None


def _keyed(events: DataFrame, fold: Fold, task: FoldTask) -> DataFrame:
    """The events with their fold's `key`: computed in the JVM for a `StreamKey`."""
    if isinstance(fold.key, StreamKey):
        return events.withColumn("key", _stream_key(fold.key))
    return events.mapInArrow(functools.partial(keyed, task), f"{EVENT_DDL}, {KEYED_DDL}")


def _fold_job(
    events: DataFrame, fold: Fold, task: FoldTask, partitions: int, by_key: bool
) -> DataFrame:
    """Each key's events to one task, in log order, folded there. Events read `by_key`
    are in their key's task already: they are only sorted."""
    with_keys = _keyed(events, fold, task)
    if not by_key:
        with_keys = with_keys.repartition(partitions, "key")
    in_order = with_keys.sortWithinPartitions("key", "position")
    return in_order.mapInArrow(functools.partial(fold_and_write, task), WRITTEN_DDL)


def _stream_key(key: StreamKey) -> Column:
    """`StreamKey.__call__` as a column: `str.removeprefix` on `stream_id`."""
    stream_id = F.col("stream_id")
    if not key.prefix:
        return stream_id
    # substring counts characters (code points), as Python's slicing does.
    rest = F.substring(stream_id, len(key.prefix) + 1, 1 << 30)
    return F.when(stream_id.startswith(key.prefix), rest).otherwise(stream_id)


def _selected(events: DataFrame, fold: Fold) -> DataFrame:
    """The fold's categories and types, as the store's filters would pick them."""
    if fold.categories is not None:
        category = F.substring_index(events.stream_id, "-", 1)
        events = events.where(category.isin(list(fold.categories)))
    if fold.types is not None:
        events = events.where(events.type.isin(list(fold.types)))
    return events


def _matching(events: DataFrame, fold: Fold) -> DataFrame:
    """The events matching the fold's query (`Query.matches` as Spark SQL; every source of
    the log's DataFrame has its tags, empty for none)."""
    query = fold.query
    assert query is not None
    if query.matches_all:
        return events
    matches = F.lit(False)
    for item in query.items:
        condition = F.lit(True)
        if item.types:
            condition = condition & F.col("type").isin(list(item.types))
        for tag in item.tags:
            condition = condition & F.coalesce(F.array_contains("tags", tag), F.lit(False))
        matches = matches | condition
    return events.where(matches)
