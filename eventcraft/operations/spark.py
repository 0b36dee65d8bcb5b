"""Spark export and replay, checked before a JVM starts: `check_*` make a plan, `run_*` run it.

Starting Spark costs 8 to 25 seconds, so everything that can be known
without it is checked first, in this process: the master URL's form, the
store (opened, its high-water mark read), a local archive's folder and
segments, the read-model database URL, and the fold (imported, and a
`Fold`). Only `run_export` and `run_replay` import pyspark.

An archive on a Hadoop filesystem (hdfs:, s3a:, ...) can only be looked at
through the JVM: it is passed through unchecked, and Spark reports on it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from eventcraft.eventstore import redacted, without_password
from eventcraft.projections import (
    Definition,
    Fold,
    ProjectionError,
    archive_chain_break,
    segment_span,
)

from .errors import InputError, NotFound, Problems
from .output_files import check_folder
from .references import load_reference
from .stores import open_store

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from eventcraft.projections.spark import ExportReport, ReplayReport

    from ..app import App

EXTRA = "pip install 'eventcraft[spark]'"

MASTER_FORMS = (
    "local, local[N], local[*], local[N,F], spark://host:port[,host:port], yarn, k8s://HOST:PORT"
)

_MASTER = re.compile(
    r"local(\[(\*|[1-9]\d*)(,\s*[1-9]\d*)?\])?"
    r"|local-cluster\[[1-9]\d*,\s*[1-9]\d*,\s*[1-9]\d*\]"
    r"|spark://[^\s,/:]+:\d+(,[^\s,/:]+:\d+)*"
    r"|yarn"
    r"|k8s://\S+"
)
_SQL_SCHEMES = ("sqlite", "postgresql", "postgres", "postgresql+psycopg")


@dataclass(frozen=True)
class ExportPlan:
    """A checked `spark export`: what `run_export` gives Spark."""

    store: str
    """The store URL, as the executors are given it (a SQLite path made absolute)."""
    archive: str
    """The archive: a local folder (absolute) or a Hadoop URL, passed through."""
    master: str
    """The Spark master URL."""
    high_water_mark: int
    """The store's high-water mark when it was checked."""
    parsed: bool = True
    """Whether the new segment also holds each event's data parsed, for reducer folds."""


@dataclass(frozen=True)
class ReplayPlan:
    """A checked `spark replay`: what `run_replay` gives Spark."""

    fold: Fold
    """The fold to rebuild."""
    store: str
    """The store URL, as the executors are given it."""
    archive: str | None
    """The archive to read the log from; None to read it from the store."""
    database: str | None
    """The read model's database URL; None for the store's own."""
    partitions: int | None
    """Tasks that fold and write; None for the cores Spark has."""
    master: str
    """The Spark master URL."""
    progress: bool
    """Whether to show a progress bar per stage."""
    high_water_mark: int
    """The store's high-water mark when it was checked."""


def check_export(
    store: str, archive: str, *, master: str = "local[*]", parsed: bool = True
) -> ExportPlan:
    """A plan to extend the archive at `archive` with the store's new events.

    A local archive folder is created if it is missing, but its parent must
    exist: a mistyped parent does not silently become a tree of new folders. It
    is neither one of the store's own files nor the folder that holds them
    (`output_files.check_folder`).
    """
    master = check_master(master)
    archive = _export_archive(archive, store)
    store, head = check_store(store)
    return ExportPlan(
        store=store, archive=archive, master=master, high_water_mark=head, parsed=parsed
    )


def check_replay(
    fold: str,
    store: str,
    *,
    archive: str | None = None,
    database: str | None = None,
    partitions: int | None = None,
    master: str = "local[*]",
    progress: bool = False,
    app: App | None = None,
) -> ReplayPlan:
    """A plan to rebuild the fold named `fold` (`module:attribute`, or a name in `app`).

    A local `archive` must hold committed segments that chain from position
    1 and end at or below the store's high-water mark: a missing archive is
    an error, never an empty log.
    """
    master = check_master(master)
    if partitions is not None and (isinstance(partitions, bool) or partitions < 1):
        raise InputError(f"--partitions is a number of tasks, at least 1, not {partitions!r}")
    segments = _replay_archive(archive) if archive is not None else None
    database = check_database(database) if database is not None else None
    found = load_fold(fold, app)
    store, head = check_store(store)
    if segments and segments[-1][1] > head:
        raise InputError(
            f"the archive {archive!r} holds events up to position {segments[-1][1]}, "
            f"but the store ends at {head}: it is not an archive of this store"
        )
    return ReplayPlan(
        fold=found,
        store=store,
        archive=None if archive is None else _absolute(archive),
        database=database,
        partitions=partitions,
        master=master,
        progress=progress,
        high_water_mark=head,
    )


def run_export(plan: ExportPlan) -> ExportReport:
    """Start (or join) a SparkSession and append the store's new events to the archive."""
    spark = session(plan.master)
    from eventcraft.projections.spark import Archive

    try:
        return Archive(plan.archive, parsed=plan.parsed).export(spark, plan.store)
    except ProjectionError as error:
        raise translated(error) from error


def run_replay(plan: ReplayPlan) -> ReplayReport:
    """Start (or join) a SparkSession, rebuild the fold's read model and swap it in."""
    spark = session(plan.master)
    from eventcraft.projections.spark import Archive, replay

    try:
        return replay(
            plan.fold,
            plan.store,
            spark=spark,
            source=Archive(plan.archive) if plan.archive is not None else None,
            database=plan.database,
            partitions=plan.partitions,
            progress=plan.progress,
        )
    except ProjectionError as error:
        raise translated(error) from error


def check_master(master: str) -> str:
    """`master` if Spark would take it as a master URL."""
    if not isinstance(master, str) or not _MASTER.fullmatch(master):
        raise InputError(f"--master {master!r} is not a Spark master URL: use {MASTER_FORMS}")
    return master


def check_store(url: str) -> tuple[str, int]:
    """The store URL as the executors must be given it, and its high-water mark.

    The store is opened here (a wrong URL or an unreachable server fails
    now, not in a Spark task); a SQLite file must already exist, since
    opening a missing one would create an empty store and export nothing.
    """
    scheme, path, query = _parts(url)
    if scheme == "memory" or (scheme == "sqlite" and (not path or path.startswith(":memory:"))):
        raise InputError(
            f"Spark reads the log from its executors, which cannot see {redacted(url)!r}: "
            "give a sqlite:/// or postgresql:// store URL"
        )
    if scheme == "sqlite":
        url = f"sqlite:///{os.path.abspath(path)}" + (f"?{query}" if query else "")
    with open_store(url) as store:  # NotFound, UnsupportedStoreURL, StoreUnavailable
        return url, store.high_water_mark()


def check_database(url: str) -> str:
    """The read-model database URL, parsed as the store's reader parses it."""
    scheme, path, query = _parts(url)
    if scheme not in _SQL_SCHEMES or (scheme == "sqlite" and (not path or path == ":memory:")):
        raise InputError(
            f"--database {redacted(url)!r}: the executors write the read model, so give a "
            "sqlite:///PATH or postgresql://user@host/db URL"
        )
    if scheme == "sqlite":
        return f"sqlite:///{os.path.abspath(path)}" + (f"?{query}" if query else "")
    from eventcraft.eventstore import PostgresTarget, UnsupportedStoreURL

    try:
        PostgresTarget.from_url(url)
    except (UnsupportedStoreURL, ValueError) as error:
        raise InputError(
            f"--database {redacted(url)!r}: {without_password(url, str(error))}"
        ) from error
    return url


def load_fold(reference: str, app: App | None = None) -> Fold:
    """The Fold named `module:attribute` (from the current folder too), or by name in `app`."""
    if ":" not in reference and app is not None:
        named = {definition.name: definition for definition in app.projections}
        if reference not in named:
            raise NotFound(f"the app has no projection {reference!r}: it has {sorted(named)}")
        found: object = named[reference]
    else:
        found = load_reference(reference, "the fold")
    if not isinstance(found, Definition):
        raise InputError(f"{reference!r} is {type(found).__name__}, not a projection definition")
    if not isinstance(found, Fold):
        raise InputError(
            f"{reference!r} is a {type(found).__name__}: a Spark replay runs a Fold "
            "(key, initial, apply); rebuild it in process with `eventcraft projections rebuild`"
        )
    return found


def _export_archive(archive: str, store: str) -> str:
    local = _local_path(archive)
    if local is None:
        return archive
    check_folder(local, store)
    if os.path.exists(local):
        if not os.path.isdir(local):
            raise InputError(f"the archive {local!r} is a file, not a folder")
        writable = local
    else:
        writable = os.path.dirname(local)
        if not os.path.isdir(writable):
            raise NotFound(
                f"the archive's parent folder {writable!r} does not exist "
                "(the archive folder is created, its parent is not)"
            )
    if not os.access(writable, os.W_OK | os.X_OK):
        raise InputError(f"cannot write the archive in {writable!r}: permission denied")
    return _absolute(archive)


def _replay_archive(archive: str) -> list[tuple[int, int]] | None:
    """A local archive's committed segments, checked to chain; None for a Hadoop URL."""
    local = _local_path(archive)
    if local is None:
        return None
    if not os.path.isdir(local):
        what = "is not a folder" if os.path.exists(local) else "does not exist"
        raise NotFound(f"the archive {local!r} {what}: nothing to replay from")
    segments = sorted(
        span
        for name in os.listdir(local)
        if (span := segment_span(name)) and os.path.exists(os.path.join(local, name, "_SUCCESS"))
    )
    if not segments:
        raise InputError(
            f"the archive {local!r} holds no committed segment (from-N-to-M/ with _SUCCESS): "
            "export to it first with `eventcraft spark export`"
        )
    broken = archive_chain_break(segments)
    if broken:
        raise InputError(f"the archive {local!r} is not one log: {broken}")
    return segments


def _local_path(archive: str) -> str | None:
    """The local path `archive` names, absolute; None for a Hadoop URL (hdfs:, s3a:, ...).

    As `Archive` reads it: a path with no `scheme://` is local, and so is a file: URL.
    """
    if not isinstance(archive, str) or not archive:
        raise InputError(f"an archive is a folder or a Hadoop URL, not {archive!r}")
    if archive.startswith("file:"):
        parts = urlsplit(archive)
        return parts.path if parts.netloc in ("", "localhost") else None
    if "://" in archive:
        return None
    return os.path.abspath(archive)


def _absolute(archive: str) -> str:
    plain = "://" not in archive and not archive.startswith("file:")
    return os.path.abspath(archive) if plain else archive


def _parts(url: str) -> tuple[str, str, str]:
    """A store URL's scheme (lower case), its path after `scheme:///`, and its query."""
    if not isinstance(url, str) or "://" not in url:
        return "", "", ""
    scheme, rest = url.split("://", 1)
    path, _, query = rest.removeprefix("/").partition("?")
    return scheme.lower(), path, query


def session(master: str) -> SparkSession:
    """The process's SparkSession: the running one if there is one (a notebook, a test)."""
    try:
        from eventcraft.projections.spark import LOCAL_SETTINGS, spark_session
    except ModuleNotFoundError as error:
        raise InputError(f"Spark commands need the spark extra: {EXTRA}") from error
    local = master == "local" or master.startswith("local[")
    return spark_session(master, settings=LOCAL_SETTINGS if local else None)


def translated(error: ProjectionError) -> Exception:
    """What the shells show: a definition or archive refused is input, a failed job a problem."""
    from eventcraft.projections import DefinitionError
    from eventcraft.projections.spark import ArchiveError

    if isinstance(error, DefinitionError | ArchiveError):
        return InputError(str(error))
    return Problems(str(error))
