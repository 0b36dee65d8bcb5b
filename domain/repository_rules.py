"""What `Repository` and `AsyncRepository` decide, apart from how they reach the store.

How a snapshot becomes a starting state, which events a save appends and at
what expected version, when a snapshot is due and what it holds: written
once, here, so that the sync and async repositories cannot drift.
"""

from __future__ import annotations

import logging
import sys
import uuid
from collections.abc import Mapping, Sequence
from types import EllipsisType
from typing import Any, Generic, TypeVar

from eventcraft.eventstore import (
    NO_STREAM,
    AppendResult,
    ExpectedVersion,
    NewEvent,
    RecordedEvent,
    Snapshot,
)
from pydantic import ValidationError

from . import telemetry
from .aggregate import Aggregate
from .checks import positive_int_or_none
from .context import CommandContext, current_context

A = TypeVar("A", bound=Aggregate[Any])

log = logging.getLogger("eventcraft.domain")


class RepositoryRules(Generic[A]):
    """The store-free part of a repository of aggregates of one type."""

    def __init__(
        self, aggregate_type: type[A], *, snapshot_every: int | EllipsisType | None = ...
    ) -> None:
        self.aggregate_type = aggregate_type
        # `...` means the aggregate class's own setting; None turns snapshots off.
        every = aggregate_type.snapshot_every if snapshot_every is ... else snapshot_every
        self.snapshot_every = positive_int_or_none("snapshot_every", every)

    def _start_from(self, aggregate: A, snapshot: Snapshot | None) -> tuple[Any, int]:
        """The state and version to rebuild `aggregate` from: `snapshot`'s if it fits."""
        cls = self.aggregate_type
        initial = aggregate.state
        if snapshot is None or snapshot.type != cls.category:
            return initial, 0
        if snapshot.schema_version != cls.schema_version:
            return initial, 0  # the state changed shape since: rebuild it from events
        try:
            return cls.state_type.model_validate(snapshot.data), snapshot.version
        except ValidationError as error:
            log.warning(
                "ignoring the snapshot of %s at version %d: it does not fit %s: %s",
                aggregate.stream_id,
                snapshot.version,
                cls.state_type.__qualname__,
                telemetry.misfit(error),
            )
            return initial, 0

    @staticmethod
    def _until(version: int | None) -> int:
        """The last version a load folds: `version`, checked, or all of them."""
        if version is None:
            return sys.maxsize
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise ValueError(f"version must be a positive int, not {version!r}")
        return version

    @staticmethod
    def _fitting(snapshot: Snapshot | None, until: int) -> Snapshot | None:
        """`snapshot` unless it is past the last version a load folds."""
        return snapshot if snapshot is None or snapshot.version <= until else None

    def _to_append(
        self,
        aggregate: A,
        metadata: Mapping[str, Any] | None,
        idempotency_key: uuid.UUID | None = None,
    ) -> tuple[list[NewEvent], ExpectedVersion] | None:
        """The events a save appends and the version it expects; None if nothing is pending.

        Their metadata comes from the current `command_context` (else new
        ids), updated by `metadata`; their ids are the aggregate's, so a
        save sent again after a lost answer writes nothing new. With an
        `idempotency_key`, the ids are derived from it instead (`keyed_ids`):
        the same command run again, on any load, saves the same ids.
        """
        if not isinstance(aggregate, self.aggregate_type):
            raise TypeError(
                f"this repository saves {self.aggregate_type.__qualname__}, "
                f"not {type(aggregate).__qualname__}"
            )
        if not aggregate._pending:
            return None
        context = current_context() or CommandContext.new()
        base = {**context.metadata(), **(metadata or {})}
        to_new_event = aggregate.registry.to_new_event
        pending = aggregate._pending
        ids = [id for _, id in pending]
        if idempotency_key is not None:
            ids = keyed_ids(idempotency_key, len(ids))
        events = [to_new_event(e, base, id) for (e, _), id in zip(pending, ids, strict=True)]
        stored = aggregate.stored_version
        return events, stored if stored else NO_STREAM

    def _to_append_all(
        self, aggregates: Sequence[A], metadata: Mapping[str, Any] | None
    ) -> list[tuple[A, list[NewEvent], ExpectedVersion]]:
        """What `save_all` appends: each aggregate with pending events, its events and the
        version it expects. One aggregate given twice is refused: its events would go twice."""
        if len({aggregate.stream_id for aggregate in aggregates}) != len(aggregates):
            raise ValueError("save_all: the same aggregate is given twice")
        saves = []
        for aggregate in aggregates:
            to_append = self._to_append(aggregate, metadata)
            if to_append is not None:
                saves.append((aggregate, *to_append))
        return saves

    def _saved_all(
        self,
        aggregates: Sequence[A],
        saves: list[tuple[A, list[NewEvent], ExpectedVersion]],
        results: Sequence[AppendResult],
    ) -> tuple[list[AppendResult | None], list[A]]:
        """After `save_all`'s append: each aggregate marked saved; the results in the order
        of `aggregates` (None where nothing was pending), and those due a snapshot."""
        saved = {
            id(aggregate): result for (aggregate, _, _), result in zip(saves, results, strict=True)
        }
        due = []
        for aggregate, _, _ in saves:
            stored = aggregate.stored_version
            aggregate._saved(saved[id(aggregate)].version)
            if self._snapshot_due(stored, aggregate.stored_version):
                due.append(aggregate)
        return [saved.get(id(aggregate)) for aggregate in aggregates], due

    def _snapshot_due(self, before: int, after: int) -> bool:
        """Whether a save from version `before` to `after` passed a multiple of the setting."""
        every = self.snapshot_every
        return every is not None and after // every > before // every

    def _snapshot_of(self, aggregate: A) -> dict[str, Any]:
        """The arguments of `save_snapshot` for `aggregate` as saved."""
        return {
            "version": aggregate.stored_version,
            "type": self.aggregate_type.category,
            "schema_version": self.aggregate_type.schema_version,
            "data": aggregate.state,
        }


def keyed_ids(key: uuid.UUID, count: int) -> list[uuid.UUID]:
    """`count` event ids for the events of one command keyed by `key`: the key itself
    first, then ids derived from it (UUID 5), the same every time."""
    return [key, *(uuid.uuid5(key, str(n)) for n in range(1, count))]


def taken_before(stored: RecordedEvent | None, stream_id: str) -> RecordedEvent | None:
    """The first event a keyed command stored (`read_event(key)`: the key is its id), if
    the command stored it in `stream_id`: the request was taken before.

    Run again on the state it first saw (up to before that event), a command
    decides as it did then, with the same events and ids, and the store
    answers their append as a retry with the first result. Run on today's
    state it might refuse (the money is withdrawn, the seat taken) a request
    that in fact succeeded. An id stored in another stream is left to the
    store, which refuses the append (`DuplicateEventId`).
    """
    return stored if stored is not None and stored.stream_id == stream_id else None


def check_attempts(attempts: int) -> int:
    if attempts < 1:
        raise ValueError(f"attempts must be at least 1, not {attempts}")
    return attempts
