"""The stages of a running Spark job as progress bars on the terminal.

Spark's own console progress is off in `LOCAL_SETTINGS` (it interleaves
with everything else written); this polls the driver's status tracker
instead and shows one bar per stage, named after what the stage does.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from pyspark.sql import SparkSession
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn

_POLL = 0.25


@contextmanager
def stage_progress(
    spark: SparkSession, shown: bool, title: str, stages: Sequence[str] = ()
) -> Iterator[None]:
    """While the body runs, a bar of tasks done per stage of the jobs it starts.

    `stages` names the stages in the order they start; Spark's own names
    are the call site of the action, the same for every stage of a job.
    """
    if not shown:
        yield
        return
    tracker = spark.sparkContext.statusTracker()
    done = threading.Event()
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns) as bar:
        bars: dict[int, TaskID] = {}

        def poll() -> None:
            while not done.wait(_POLL):
                for stage_id in tracker.getActiveStageIds():
                    info = tracker.getStageInfo(stage_id)
                    if info is None:
                        continue
                    if stage_id not in bars:
                        what = stages[len(bars)] if len(bars) < len(stages) else "stage"
                        label = f"{title}: {what} (stage {stage_id})"
                        bars[stage_id] = bar.add_task(label, total=info.numTasks)
                    bar.update(bars[stage_id], completed=info.numCompletedTasks)
            for stage_id, task in bars.items():
                info = tracker.getStageInfo(stage_id)
                if info is not None:
                    bar.update(task, completed=info.numCompletedTasks)

        poller = threading.Thread(target=poll, name="spark-progress", daemon=True)
        poller.start()
        try:
            yield
        finally:
            done.set()
            poller.join()
