"""projections.spark: the log replayed as Spark jobs, for rebuilds and ad-hoc questions.

Imports pyspark: install the `spark` extra (`pip install eventcraft[spark]`).
"""

from .archive import Archive, ArchiveError, ExportReport, Segment
from .events import read_events
from .replay import ReplayFailed, ReplayReport, replay
from .session import LOCAL_SETTINGS, spark_session
from .typed import EventTypes

__all__ = [
    "LOCAL_SETTINGS",
    "Archive",
    "ArchiveError",
    "EventTypes",
    "ExportReport",
    "ReplayFailed",
    "ReplayReport",
    "Segment",
    "read_events",
    "replay",
    "spark_session",
]
