"""eventcraft.projections.spark: the log replayed as Spark jobs, for rebuilds and questions.

Imports pyspark: install the `spark` extra (`pip install 'eventcraft[spark]'`); Java 17 runs it.
"""

# The extra is checked before the modules that need it are imported.
from importlib.util import find_spec

if find_spec("pyspark") is None or find_spec("pyarrow") is None:
    raise ModuleNotFoundError(
        "eventcraft.projections.spark needs the spark extra: pip install 'eventcraft[spark]'",
        name="pyspark",
    )

from .archive import Archive, ArchiveError, ExportReport, Segment
from .events import read_events
from .replay import ReplayFailed, ReplayReport, replay
from .session import LOCAL_SETTINGS, spark_session
from .typed import EventTypes
from .verification import VerifiedTypeVersion, verify_events

__all__ = [
    "LOCAL_SETTINGS",
    "Archive",
    "ArchiveError",
    "EventTypes",
    "ExportReport",
    "ReplayFailed",
    "ReplayReport",
    "Segment",
    "VerifiedTypeVersion",
    "read_events",
    "replay",
    "spark_session",
    "verify_events",
]
