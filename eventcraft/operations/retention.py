"""Applying retention: what a run would remove (`plan`), and the run (`apply`), which
archives the log up to its mark before it removes anything.

A run's mark is the store's high-water mark, or less: never beyond the
checkpoint of a projection the caller names (a projection behind the mark
would find holes in the store where it has not read yet), nor beyond an
`up_to` asked for. Before the store removes a thing, the Parquet archive is
extended with every event up to the mark, kept or removed, as stored
(personal fields sealed), and its segment committed: the archive up to the
mark followed by the store after it is the whole log, which is how
projections and replays read it from then on. `apply` plans again as it
runs: what it does is what the log holds then, not what an earlier plan saw.

One run at a time per store, and per archive: `apply` holds the store's
retention lock (`Retention.exclusive`: a second run is refused whatever folder
it was given) and the archive's (`projections/archive_lock.py`: runs of two
stores never share a folder) from that plan until the removal has committed,
and a second run is refused at once (`Problems`), having done nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar

from eventcraft.eventstore import EventStore, RetentionBusy, category_of
from eventcraft.eventstore.retention import (
    DELETED_RULE,
    NoRetention,
    RetentionPolicy,
    RetentionRun,
    Truncation,
    check_pace,
    rest,
    rules_text,
)
from eventcraft.projections import ArchiveBusy, ArchiveFiles, archive_run_lock
from eventcraft.sagas import SAGA_CATEGORY

from .errors import InputError, NotFound, Problems
from .output_files import check_folder

T = TypeVar("T")


@dataclass(frozen=True)
class Removal:
    rule: str
    """One policy or truncation, as text."""
    events: int
    """Events it would remove now."""


@dataclass(frozen=True)
class RetentionPlan:
    head: int
    """The store's high-water mark."""
    up_to: int
    """The mark a run would set: removes nothing beyond it, archives everything up to it."""
    held_by: str | None
    """The projection whose checkpoint keeps the mark below the head, if one does."""
    low_water_mark: int
    """The mark the last run set (0: none)."""
    archive: str
    archived_to: int
    """The archive's last position now: a run writes the positions after it, to `up_to`."""
    removals: tuple[Removal, ...]


@dataclass(frozen=True)
class RetentionReport:
    run: RetentionRun
    archived: int
    """Events this run wrote into the archive."""
    plan: RetentionPlan
    archive_seconds: float
    """How long archiving took."""
    remove_seconds: float
    """How long the store's transaction that removed the events took."""


def plan(
    store: EventStore,
    policies: Sequence[RetentionPolicy],
    truncations: Sequence[Truncation],
    archive: str,
    *,
    up_to: int | None = None,
    checkpoints: Mapping[str, int] | None = None,
    now: datetime | None = None,
    counting: bool = True,
) -> RetentionPlan:
    """What a run with these rules would do now; without `counting`, where it would archive
    and remove up to, but not how many each rule removes (no removals)."""
    if not policies and not truncations:
        raise InputError("retention needs a policy (--keep) or a truncation (--truncate)")
    moment = now or datetime.now(UTC)
    _check_rules(store, policies, truncations, moment)
    files = _archive_files(archive, store.url)
    head = store.high_water_mark()
    archived_to = files.last_position()
    if archived_to > head:
        raise InputError(
            f"the archive at {files.path} holds events up to position {archived_to}, but the "
            f"store ends at {head}: it is not this store's archive"
        )
    low_water_mark = store.low_water_mark()
    if archived_to < low_water_mark:
        raise InputError(
            f"the archive at {files.path} ends at position {archived_to}, but the store's log "
            f"begins to be whole after {low_water_mark}: give the archive the last run wrote "
            f"({store.retention.runs()[-1].archive})"
        )
    mark, held_by = head, None
    if up_to is not None:
        mark = min(mark, up_to)
    if checkpoints:
        name, position = min(checkpoints.items(), key=lambda item: item[1])
        if position < mark:
            mark, held_by = position, name
    rules = [rules_text([p], []) for p in policies] + [rules_text([], [t]) for t in truncations]
    rules.append(DELETED_RULE)  # every run removes what deleted streams held, too
    counts = store.retention.count(policies, truncations, mark, moment) if counting else []
    return RetentionPlan(
        head=head,
        up_to=mark,
        held_by=held_by,
        low_water_mark=low_water_mark,
        archive=str(files.path),
        archived_to=archived_to,
        removals=tuple(
            Removal(rule, count)
            for rule, count in zip(rules, counts, strict=False)
            if count or rule != DELETED_RULE  # said only when there is something to remove
        ),
    )


def apply(
    store: EventStore,
    policies: Sequence[RetentionPolicy],
    truncations: Sequence[Truncation],
    archive: str,
    *,
    up_to: int | None = None,
    checkpoints: Mapping[str, int] | None = None,
    now: datetime | None = None,
    pace: float = 1.0,
) -> RetentionReport:
    """Archive the log up to the plan's mark, then remove what the rules name below it.

    With `pace` below 1 the run works that share of the time and rests the rest, archiving
    and (on PostgreSQL) removing a part at a time, so that appends keep more of the machine.
    """
    check_pace(pace)
    moment = now or datetime.now(UTC)
    _check_rules(store, policies, truncations, moment)  # before the archive is touched
    files = _archive_files(archive, store.url)
    try:
        files.path.mkdir(exist_ok=True)  # its parent is there (`_archive_files`)
    except OSError as error:
        raise InputError(
            f"the archive folder {files.path} cannot be made: {error.strerror}"
        ) from None
    try:
        # The store's first, then the folder's, always in this order.
        with store.retention.exclusive(), archive_run_lock(files.path):
            return _locked_apply(
                store, policies, truncations, files, up_to, checkpoints, moment, pace
            )
    except (RetentionBusy, ArchiveBusy) as busy:
        raise Problems(str(busy)) from None


def _locked_apply(
    store: EventStore,
    policies: Sequence[RetentionPolicy],
    truncations: Sequence[Truncation],
    files: ArchiveFiles,
    up_to: int | None,
    checkpoints: Mapping[str, int] | None,
    moment: datetime,
    pace: float,
) -> RetentionReport:
    """`apply`'s plan, archive and removal, under the store's and the archive's locks."""
    # Where to archive and remove up to, decided again now; not counted (the removal counts).
    planned = plan(
        store,
        policies,
        truncations,
        str(files.path),
        up_to=up_to,
        checkpoints=checkpoints,
        now=moment,
        counting=False,
    )
    archived = 0
    started = time.perf_counter()
    if planned.archived_to < planned.up_to:
        first, last = planned.archived_to + 1, planned.up_to
        # As stored: the archive keeps personal fields sealed, so a forget reaches it.
        with EventStore.open(store.url, sealed=True) as sealed:
            records = sealed.read_all_encoded(after=planned.archived_to, until=last)
            archived = files.write_segment(first, last, _paced(records, pace))
    archived_at = time.perf_counter()
    run = store.retention.remove(
        policies, truncations, planned.up_to, str(files.path), moment, pace
    )
    removed_at = time.perf_counter()
    return RetentionReport(run, archived, planned, archived_at - started, removed_at - archived_at)


def _check_rules(
    store: EventStore,
    policies: Sequence[RetentionPolicy],
    truncations: Sequence[Truncation],
    now: datetime,
) -> None:
    """Refuse a store that cannot remove events, an age that reaches before year 1, and
    a rule on the sagas' streams, before anything is read or written."""
    if isinstance(store.retention, NoRetention):
        raise InputError(f"retention needs a SQLite or PostgreSQL store, not {store.url}")
    # A saga instance is its whole stream: cut from the start, a running one would resume
    # without the input it started with. Finished ones go as deleted streams do.
    cuts = [f"a policy for {p.category!r}" for p in policies if p.category == SAGA_CATEGORY] + [
        f"a truncation of {t.stream_id!r}"
        for t in truncations
        if category_of(t.stream_id) == SAGA_CATEGORY
    ]
    if cuts:
        raise InputError(
            f"{cuts[0]}: saga instances rebuild their state from their whole stream, so "
            f"retention never cuts the {SAGA_CATEGORY!r} category; delete a finished instance's "
            "stream (delete-stream) and the next run removes it"
        )
    for policy in policies:
        if policy.max_age is not None:
            try:
                now - policy.max_age
            except OverflowError:
                raise InputError(
                    f"policy for {policy.category!r}: an age of {policy.max_age.days} days "
                    "reaches back before the year 1"
                ) from None


def _archive_files(archive: str, store_url: str) -> ArchiveFiles:
    """The archive at `archive`: a folder, or one to be made in a folder that exists (a
    mistyped parent does not silently become a tree of new folders, as in `spark.py`),
    and neither one of the store's own files nor their folder (`output_files`)."""
    files = ArchiveFiles(archive)
    check_folder(str(files.path), store_url)
    if files.path.exists() and not files.path.is_dir():
        raise InputError(f"the archive {files.path} is a file: give a folder")
    if not files.path.exists() and not files.path.parent.is_dir():
        raise NotFound(
            f"the archive's parent folder {str(files.path.parent)!r} does not exist "
            "(the archive folder is created, its parent is not)"
        )
    return files


_PACED_PART = 10_000


def _paced(records: Iterable[T], pace: float) -> Iterator[T]:
    """`records`, resting after each part so that reading them is `pace` of the time."""
    if pace >= 1:
        yield from records
        return
    started, count = time.perf_counter(), 0
    for record in records:
        yield record
        count += 1
        if count == _PACED_PART:
            rest(started, pace)
            started, count = time.perf_counter(), 0
