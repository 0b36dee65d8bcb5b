"""An in-process backend: for tests and for domain code that needs no database."""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime

import orjson

from .arguments import AppendCall, url_options
from .deletion import StreamDeletion, check_delete, refuse_tombstoned, visible_version
from .encoding import PreparedBatch, PreparedEvent, decode
from .errors import STORE_CLOSED, AppendConditionFailed, StoreUnavailable, WrongExpectedVersion
from .events import (
    ANY,
    EVENT_VERSION,
    NO_STREAM,
    AppendResult,
    EncodedEvent,
    RecordedEvent,
    StreamInfo,
    StreamState,
)
from .idempotency import StoredId, resolve_stored_appends
from .port import Backend
from .query import AppendCondition
from .snapshot import PreparedSnapshot, Snapshot, beyond_the_stream
from .type_counts import Tally, TypeCount


class MemoryBackend(Backend):
    @classmethod
    def from_url(cls, url: str) -> MemoryBackend:
        """A new, empty store for `memory://`, which takes no options."""
        url_options(url, "memory", ())
        return cls()

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._appended = threading.Condition(self._lock)
        self._log: list[RecordedEvent] = []  # position p is at index p - 1
        self._streams: dict[str, list[RecordedEvent]] = {}
        self._by_id: dict[object, RecordedEvent] = {}
        self._snapshots: dict[str, Snapshot] = {}
        self._deleted: dict[str, StreamDeletion] = {}
        self._closed = False

    def append(
        self,
        stream_id: str,
        category: str,
        batch: PreparedBatch,
        expected: int | StreamState,
        condition: AppendCondition | None = None,
    ) -> AppendResult:
        return self.append_many([AppendCall(stream_id, category, batch, expected, condition)])[0]

    def append_many(self, calls: Sequence[AppendCall]) -> list[AppendResult]:
        encoded = [call.batch.all() for call in calls]  # may refuse an event: before any change
        with self._open():
            for call in calls:  # before a retry is recognised: a tombstone takes nothing
                refuse_tombstoned(call.stream_id, self._deleted.get(call.stream_id))
            stored = [
                StoredId(e.id, e.stream_id, e.version, e.position)
                for call in calls
                for e in (self._by_id.get(id) for id in call.batch.ids)
                if e is not None
            ]
            retry = resolve_stored_appends(
                [(call.stream_id, call.batch.ids) for call in calls], stored
            )
            if retry is not None:
                return retry
            for call in calls:
                actual = self._version(call.stream_id)
                expected = call.expected
                if expected is not ANY and actual != (0 if expected is NO_STREAM else expected):
                    raise WrongExpectedVersion(call.stream_id, expected, actual)
            for call in calls:
                if call.condition is not None:
                    self._check(call.stream_id, call.condition)
            results = [
                self._record(call.stream_id, events)
                for call, events in zip(calls, encoded, strict=True)
            ]
            self._appended.notify_all()
            return results

    def _check(self, stream_id: str, condition: AppendCondition) -> None:
        query = condition.fail_if_events_match
        for event in self._log[condition.after or 0 :]:
            if query.matches(event.type, event.tags):
                raise AppendConditionFailed(stream_id, query, condition.after, event.position)

    def _record(self, stream_id: str, events: Sequence[PreparedEvent]) -> AppendResult:
        stream = self._streams.setdefault(stream_id, [])
        now = datetime.now(UTC)
        recorded = [
            RecordedEvent(
                id=event.id,
                stream_id=stream_id,
                version=len(stream) + offset,
                position=len(self._log) + offset,
                type=event.type,
                data=decode(event.data),
                metadata=decode(event.metadata),
                recorded_at=event.recorded_at or now,
                tags=event.tags,
            )
            for offset, event in enumerate(events, start=1)
        ]
        self._log.extend(recorded)
        stream.extend(recorded)
        self._by_id.update((e.id, e) for e in recorded)
        return AppendResult(
            version=recorded[-1].version, positions=tuple(e.position for e in recorded)
        )

    def read_stream(
        self, stream_id: str, *, from_version: int | None, backwards: bool, limit: int | None
    ) -> Iterator[RecordedEvent]:
        with self._open():
            stream = list(self._streams.get(stream_id, ()))
            hidden = self._hidden(stream_id)
        if backwards:
            end = len(stream) if from_version is None else min(from_version, len(stream))
            selected = stream[:end][::-1]
        else:
            selected = stream[max((from_version or 1) - 1, 0) :]
        return iter([event for event in selected if event.version > hidden][:limit])

    def read_stream_encoded(self, stream_id: str, *, from_version: int) -> Iterator[EncodedEvent]:
        with self._open():
            hidden = self._hidden(stream_id)
            tail = self._streams.get(stream_id, [])[from_version - 1 :]
            stream = [event for event in tail if event.version > hidden]
        for event in stream:
            metadata = event.metadata
            stored = orjson.dumps(metadata[EVENT_VERSION]) if EVENT_VERSION in metadata else None
            yield EncodedEvent(
                event.version,
                event.type,
                orjson.dumps(event.data).decode(),
                None if stored is None else stored.decode(),
            )

    def read_all(
        self,
        *,
        after: int,
        limit: int | None,
        categories: Sequence[str] | None,
        types: Sequence[str] | None,
    ) -> Iterator[RecordedEvent]:
        with self._open():
            tail = self._log[after:]
        return _filtered(tail, limit, categories, types)

    def count_types(
        self, *, after: int, until: int | None, types: Sequence[str] | None
    ) -> list[TypeCount]:
        with self._open():
            tail = self._log[after:until]
        wanted = None if types is None else set(types)
        tally = Tally()
        for event in tail:
            if wanted is None or event.type in wanted:
                stored = event.metadata.get(EVENT_VERSION)
                text = None if stored is None else orjson.dumps(stored).decode()
                tally.add(event.type, text, 1, event.position, event.recorded_at)
        return tally.counts()

    def high_water_mark(self) -> int:
        with self._open():
            return len(self._log)

    def wait_for_events(self, after: int, timeout: float) -> bool:
        with self._open():
            # A close wakes the wait, which then says the store is closed.
            found = self._appended.wait_for(lambda: self._closed or len(self._log) > after, timeout)
            if self._closed:
                raise StoreUnavailable(STORE_CLOSED)
            return found

    def stream_version(self, stream_id: str) -> int:
        with self._open():
            return self._version(stream_id)

    def _version(self, stream_id: str) -> int:
        """The version reads show (the caller holds the lock)."""
        stored = len(self._streams.get(stream_id, ()))
        return visible_version(self._deleted.get(stream_id), stored)

    def _hidden(self, stream_id: str) -> int:
        """Versions up to this are deleted (the caller holds the lock)."""
        deletion = self._deleted.get(stream_id)
        return 0 if deletion is None else deletion.version

    def delete_stream(
        self,
        stream_id: str,
        expected: int | StreamState,
        tombstone: bool,
        deleted_at: datetime | None,
    ) -> StreamDeletion:
        with self._open():
            stored = len(self._streams.get(stream_id, ()))
            check_delete(stream_id, expected, self._deleted.get(stream_id), stored)
            deletion = StreamDeletion(stream_id, stored, tombstone, deleted_at or datetime.now(UTC))
            self._deleted[stream_id] = deletion
            return deletion

    def stream_deletion(self, stream_id: str) -> StreamDeletion | None:
        with self._open():
            return self._deleted.get(stream_id)

    def placed_deletions(self, after: int, until: int) -> list[tuple[int, StreamDeletion]]:
        with self._open():
            placed = [
                (self._streams[d.stream_id][d.version - 1].position if d.version else 0, d)
                for d in self._deleted.values()
            ]
        return sorted(
            (p for p in placed if after < p[0] <= until or p[0] == after == 0),
            key=lambda p: (p[0], p[1].stream_id),
        )

    def list_streams(
        self, *, category: str | None, after: str | None, limit: int | None
    ) -> Iterator[StreamInfo]:
        with self._open():
            infos = sorted(
                (StreamInfo(stream_id, self._version(stream_id)) for stream_id in self._streams),
                key=lambda info: info.stream_id,
            )
        infos = [info for info in infos if info.version]  # deleted, not written since
        if after is not None:
            infos = infos[bisect.bisect_right([i.stream_id for i in infos], after) :]
        if category is not None:
            infos = [i for i in infos if i.stream_id.split("-", 1)[0] == category]
        return iter(infos[:limit])

    def save_snapshot(self, snapshot: PreparedSnapshot) -> None:
        with self._open():
            actual = self._version(snapshot.stream_id)
            if snapshot.version > actual:
                raise beyond_the_stream(snapshot.stream_id, snapshot.version, actual)
            kept = self._snapshots.get(snapshot.stream_id)
            if kept is None or snapshot.version >= kept.version:
                self._snapshots[snapshot.stream_id] = Snapshot(
                    snapshot.stream_id,
                    snapshot.version,
                    snapshot.type,
                    snapshot.schema_version,
                    decode(snapshot.data),
                    datetime.now(UTC),
                )

    def load_snapshot(self, stream_id: str) -> Snapshot | None:
        with self._open():
            kept = self._snapshots.get(stream_id)
            return kept if kept is None or kept.version > self._hidden(stream_id) else None

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._appended.notify_all()

    @contextmanager
    def _open(self) -> Iterator[None]:
        """The store's lock, held; a closed store raises instead, as every backend's does."""
        with self._lock:
            if self._closed:
                raise StoreUnavailable(STORE_CLOSED)
            yield


def _filtered(
    events: list[RecordedEvent],
    limit: int | None,
    categories: Sequence[str] | None,
    types: Sequence[str] | None,
) -> Iterator[RecordedEvent]:
    wanted_categories = set(categories) if categories is not None else None
    wanted_types = set(types) if types is not None else None
    count = 0
    for event in events:
        if limit is not None and count >= limit:
            return
        if wanted_categories is not None and event.category not in wanted_categories:
            continue
        if wanted_types is not None and event.type not in wanted_types:
            continue
        count += 1
        yield event
