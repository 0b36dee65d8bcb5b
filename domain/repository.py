"""`Repository`: load aggregates from their streams and save their new events.

Saving appends with the version the aggregate was loaded at, so two
commands that raced on the same aggregate cannot both win: the second gets
`WrongExpectedVersion`, and `execute` runs it again on the fresh state.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from types import EllipsisType
from typing import Any, Generic, TypeVar

from eventcraft.eventstore import (
    NO_STREAM,
    AppendResult,
    EventStore,
    EventStoreError,
    WrongExpectedVersion,
)
from pydantic import ValidationError

from .aggregate import Aggregate
from .checks import positive_int_or_none
from .context import CommandContext, current_context
from .errors import AggregateNotFound
from .evolve import evolve

A = TypeVar("A", bound=Aggregate[Any])
R = TypeVar("R")

log = logging.getLogger("eventcraft.domain")


class Repository(Generic[A]):
    """Aggregates of one type, kept in an event store."""

    def __init__(
        self,
        store: EventStore,
        aggregate_type: type[A],
        *,
        snapshot_every: int | EllipsisType | None = ...,
    ) -> None:
        self.store = store
        self.aggregate_type = aggregate_type
        # `...` means the aggregate class's own setting; None turns snapshots off.
        every = aggregate_type.snapshot_every if snapshot_every is ... else snapshot_every
        self.snapshot_every = positive_int_or_none("snapshot_every", every)

    def load(self, aggregate_id: str) -> A:
        """The aggregate rebuilt from its stream (after its snapshot, if one fits).

        Raises `AggregateNotFound` when its stream holds no events.
        """
        aggregate = self.aggregate_type(aggregate_id)
        cls = self.aggregate_type
        state, version = aggregate.state, 0
        if self.snapshot_every is not None:
            state, version = self._from_snapshot(aggregate, state)
        decode, stream_id = cls.registry.decode_encoded, aggregate.stream_id
        for stored in self.store.read_stream_encoded(stream_id, from_version=version + 1):
            state = evolve(state, decode(stored, stream_id))
            version = stored.version
        if version == 0:
            raise AggregateNotFound(cls.__qualname__, aggregate_id, aggregate.stream_id)
        aggregate._restore(state, version)
        return aggregate

    def exists(self, aggregate_id: str) -> bool:
        return self.store.stream_version(self.aggregate_type.stream_id_of(aggregate_id)) > 0

    def save(
        self, aggregate: A, *, metadata: Mapping[str, Any] | None = None
    ) -> AppendResult | None:
        """Append the aggregate's pending events, expecting its stored version.

        Their metadata comes from the current `command_context` (else new
        ids), updated by `metadata`. Raises `WrongExpectedVersion` if another
        save came first; nothing is written then. Saving again after a lost
        answer is safe: the events keep their ids. Returns None when there
        was nothing to save.
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
        events = [to_new_event(event, base, id) for event, id in aggregate._pending]
        stored = aggregate.stored_version
        result = self.store.append(
            aggregate.stream_id, events, expected_version=stored if stored else NO_STREAM
        )
        aggregate._saved(result.version)
        every = self.snapshot_every
        if every is not None and result.version // every > stored // every:
            self._snapshot(aggregate)
        return result

    def execute(
        self,
        aggregate_id: str,
        command: Callable[[A], R],
        *,
        create: bool = False,
        attempts: int = 5,
    ) -> R:
        """Load, run `command` on the aggregate, save; again on a fresh load if a save raced.

        With `create`, a missing aggregate starts new instead of raising
        `AggregateNotFound`. After `attempts` lost races, the last
        `WrongExpectedVersion` is raised. Returns what `command` returned.
        """
        if attempts < 1:
            raise ValueError(f"attempts must be at least 1, not {attempts}")
        for attempt in range(1, attempts + 1):
            try:
                aggregate = self.load(aggregate_id)
            except AggregateNotFound:
                if not create:
                    raise
                aggregate = self.aggregate_type(aggregate_id)
            outcome = command(aggregate)
            try:
                self.save(aggregate)
            except WrongExpectedVersion:
                if attempt == attempts:
                    raise
                continue
            return outcome
        raise AssertionError("unreachable")

    def _from_snapshot(self, aggregate: A, initial: Any) -> tuple[Any, int]:
        cls = self.aggregate_type
        snapshot = self.store.load_snapshot(aggregate.stream_id)
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
                error,
            )
            return initial, 0

    def _snapshot(self, aggregate: A) -> None:
        # The events are saved: a snapshot that fails costs only speed, so
        # it must not turn a successful save into an error.
        try:
            self.store.save_snapshot(
                aggregate.stream_id,
                version=aggregate.stored_version,
                type=self.aggregate_type.category,
                schema_version=self.aggregate_type.schema_version,
                data=aggregate.state,
            )
        except EventStoreError as error:
            log.warning("no snapshot of %s: %s", aggregate.stream_id, error)
