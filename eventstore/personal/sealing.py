"""`Shredder`: a store's personal fields sealed as they are written, opened as they are read.

Every face of the store goes through it (`EventStore`, `AsyncEventStore`):
appends and snapshots seal the fields their models mark `Personal`, and
every read (streams, the log, its encoded forms, single events, snapshots)
opens them, or puts the replacement in place of a forgotten subject's. So
no reader above the store, projections and their rebuilds, the domain,
exports, the command line, the console, sees a sealed envelope.

Data given as a dict holding an envelope (a copy of a sealed store's log)
is written as given only if the envelope opens with this store's key store,
or names a key it has forgotten: a payload that merely has the envelope's
shape (a webhook's, stored as received) is refused at the append, for
every reader of the log would fail on it from then on.

Reads look at each event once (a dict lookup, or a substring search of its
JSON text) and fetch the keys of the events that hold an envelope a chunk
at a time, so that a read of many subjects asks the key store once a chunk,
and a store without personal data never opens its key store at all.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from itertools import chain, islice
from typing import Any, Generic, Protocol, TypeVar

import orjson
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from pydantic import BaseModel

from ..encoding import PreparedBatch, check_name, model_data
from ..errors import InvalidEvent, UnreadablePersonalData
from ..events import EncodedEvent, EncodedRecord, NewEvent, RecordedEvent
from ..snapshot import Snapshot
from .envelope import MARK, TEXT_MARK, check, key_ids, opened, seal
from .fields import PersonalField, personal_fields, subject_of
from .keys import KeyStore

CHUNK = 256
"""Events read ahead to look their keys up together."""


class _Read(Protocol):
    """What the store reads: events decoded (`data` a dict) or encoded (JSON text)."""

    @property
    def data(self) -> Any: ...


T = TypeVar("T", bound=_Read)


class Shredder:
    """Seals and opens one store's personal fields with the keys of `keys`."""

    def __init__(self, keys: KeyStore | str, *, sealed: bool = False) -> None:
        self._keys = keys
        self.sealed = sealed
        """Reads hand envelopes over as stored (for copies that must stay erasable)."""

    @property
    def keys(self) -> KeyStore:
        """The key store, opened when first needed: never, for a store without personal data."""
        keys = self._keys
        if isinstance(keys, str):
            keys = self._keys = KeyStore.open(keys)
        return keys

    def close(self) -> None:
        if isinstance(self._keys, KeyStore):
            self._keys.close()

    # --- writing -------------------------------------------------------------

    def seal_batch(self, batch: PreparedBatch) -> None:
        """Seal the personal fields of `batch`'s events, keys made for new subjects; refuse
        envelopes given that this store could not open."""
        plans, given = _plans(batch)
        if given:
            _check_opens(given, self.keys.opening(_given_ids(given)), self.keys.url)
        if plans:
            data = _data_of(batch, plans)  # refused before a key is made
            _apply(batch, plans, data, self.keys.sealing(_subjects(plans)))

    async def seal_batch_async(self, batch: PreparedBatch) -> None:
        plans, given = _plans(batch)
        if given:
            ciphers = await asyncio.to_thread(self.keys.opening, _given_ids(given))
            _check_opens(given, ciphers, self.keys.url)
        if plans:
            data = _data_of(batch, plans)  # refused before a key is made
            keys = await asyncio.to_thread(self.keys.sealing, _subjects(plans))
            _apply(batch, plans, data, keys)

    def seal_snapshot(
        self, stream_id: str, data: dict[str, Any] | BaseModel
    ) -> dict[str, Any] | BaseModel:
        """`data` with its personal fields sealed; subjects default to `stream_id`."""
        given = _given_snapshot(stream_id, data)
        if given:
            _check_opens(given, self.keys.opening(_given_ids(given)), self.keys.url)
        groups = _groups(data, stream_id, lambda: f"snapshot of stream {stream_id!r}")
        if not groups:
            return data
        assert isinstance(data, BaseModel)
        dumped = model_data(data, f"snapshot of stream {stream_id!r}: data")
        return seal(dumped, groups, self.keys.sealing(list(groups)))

    async def seal_snapshot_async(
        self, stream_id: str, data: dict[str, Any] | BaseModel
    ) -> dict[str, Any] | BaseModel:
        given = _given_snapshot(stream_id, data)
        if given:
            ciphers = await asyncio.to_thread(self.keys.opening, _given_ids(given))
            _check_opens(given, ciphers, self.keys.url)
        groups = _groups(data, stream_id, lambda: f"snapshot of stream {stream_id!r}")
        if not groups:
            return data
        assert isinstance(data, BaseModel)
        dumped = model_data(data, f"snapshot of stream {stream_id!r}: data")
        keys = await asyncio.to_thread(self.keys.sealing, list(groups))
        return seal(dumped, groups, keys)

    def forget(self, subject: str) -> int:
        """Delete `subject`'s key; how many keys were erased (0: none, or forgotten)."""
        return self.keys.forget(subject)

    async def forget_async(self, subject: str) -> int:
        check_name("subject", subject)
        return await asyncio.to_thread(self.keys.forget, subject)

    # --- reading -------------------------------------------------------------

    def opened(self, events: Iterator[RecordedEvent]) -> Iterator[RecordedEvent]:
        return events if self.sealed else self._opened(events, _RECORDED)

    def opened_encoded(
        self, stream_id: str, events: Iterator[EncodedEvent]
    ) -> Iterator[EncodedEvent]:
        return events if self.sealed else self._opened(events, _encoded_kind(stream_id))

    def opened_records(self, records: Iterator[EncodedRecord]) -> Iterator[EncodedRecord]:
        return records if self.sealed else self._opened(records, _RECORD)

    def opened_event(self, event: RecordedEvent | None) -> RecordedEvent | None:
        if event is None or self.sealed or MARK not in event.data:
            return event
        sealed, wanted = _RECORDED.sealed([event])
        return _RECORDED.opened([event], sealed, self.keys.opening(wanted))[0]

    def opened_snapshot(self, snapshot: Snapshot | None) -> Snapshot | None:
        if snapshot is None or self.sealed or MARK not in snapshot.data:
            return snapshot
        return _opened_snapshot(snapshot, self.keys.opening(_snapshot_ids(snapshot)))

    def _opened(self, items: Iterator[T], kind: _Kind[T]) -> Iterator[T]:
        # Iterated in C, chunk by chunk: a plain event costs one membership test and
        # no Python frame, which a generator here would add to every event.
        chunks = iter(functools.partial(_take, items), [])
        return chain.from_iterable(map(functools.partial(self._chunk_opened, kind), chunks))

    def _chunk_opened(self, kind: _Kind[T], chunk: list[T]) -> list[T]:
        if not kind.any_marked(chunk):
            return chunk
        sealed, wanted = kind.sealed(chunk)
        return kind.opened(chunk, sealed, self.keys.opening(wanted)) if sealed else chunk

    # --- reading, async --------------------------------------------------------

    def opened_async(self, events: AsyncIterator[RecordedEvent]) -> AsyncIterator[RecordedEvent]:
        return events if self.sealed else self._opened_async(events, _RECORDED)

    def opened_encoded_async(
        self, stream_id: str, events: AsyncIterator[EncodedEvent]
    ) -> AsyncIterator[EncodedEvent]:
        return events if self.sealed else self._opened_async(events, _encoded_kind(stream_id))

    def opened_records_async(
        self, records: AsyncIterator[EncodedRecord]
    ) -> AsyncIterator[EncodedRecord]:
        return records if self.sealed else self._opened_async(records, _RECORD)

    async def opened_event_async(self, event: RecordedEvent | None) -> RecordedEvent | None:
        if event is None or self.sealed or MARK not in event.data:
            return event
        sealed, wanted = _RECORDED.sealed([event])
        ciphers = await asyncio.to_thread(self.keys.opening, wanted)
        return _RECORDED.opened([event], sealed, ciphers)[0]

    async def opened_snapshot_async(self, snapshot: Snapshot | None) -> Snapshot | None:
        if snapshot is None or self.sealed or MARK not in snapshot.data:
            return snapshot
        ciphers = await asyncio.to_thread(self.keys.opening, _snapshot_ids(snapshot))
        return _opened_snapshot(snapshot, ciphers)

    async def _opened_async(self, items: AsyncIterator[T], kind: _Kind[T]) -> AsyncIterator[T]:
        chunk: list[T] = []
        async for item in items:
            chunk.append(item)
            if len(chunk) == CHUNK:
                for ready in await self._chunk_opened_async(kind, chunk):
                    yield ready
                chunk = []
        for ready in await self._chunk_opened_async(kind, chunk):
            yield ready

    async def _chunk_opened_async(self, kind: _Kind[T], chunk: list[T]) -> list[T]:
        if not kind.any_marked(chunk):
            return chunk
        sealed, wanted = kind.sealed(chunk)
        if not sealed:
            return chunk
        # The key store's table is read by a thread: the loop goes on meanwhile.
        return kind.opened(chunk, sealed, await asyncio.to_thread(self.keys.opening, wanted))


_Plan = tuple[int, NewEvent, dict[str, list[PersonalField]]]
_Given = tuple[str, dict[str, Any]]
"""Data given with an envelope, and where it is (for errors)."""


def _plans(batch: PreparedBatch) -> tuple[list[_Plan], list[_Given]]:
    """The events of `batch` that hold personal fields, with their fields by subject; and
    those given as dicts that hold an envelope already."""
    stream_id = batch.stream_id
    plans: list[_Plan] = []
    given: list[_Given] = []
    for index, event in enumerate(batch.events):
        data = event.data
        if isinstance(data, dict):
            if MARK in data:
                where = _new_where(stream_id, index, event)
                check(data, where)
                given.append((where, data))
            continue
        groups = _groups(data, stream_id, functools.partial(_new_where, stream_id, index, event))
        if groups:
            plans.append((index, event, groups))
    return plans, given


def _given_snapshot(stream_id: str, data: dict[str, Any] | BaseModel) -> list[_Given]:
    if not isinstance(data, dict) or MARK not in data:
        return []
    where = f"snapshot of stream {stream_id!r}"
    check(data, where)
    return [(where, data)]


def _given_ids(given: list[_Given]) -> set[str]:
    # Checked whole already (`check`): `key_ids` will not need to say where.
    return {key_id for _, data in given for key_id in key_ids(data, str)}


def _check_opens(given: list[_Given], ciphers: Mapping[str, AESGCM | None], keys: str) -> None:
    """Refuse given envelopes that a reader of this store could not open: each is opened
    here as a reader would (a forgotten key's fields read as their replacement)."""
    for where, data in given:
        try:
            opened(data, ciphers, lambda: where)  # noqa: B023 - called before the next turn
        except UnreadablePersonalData as error:
            raise InvalidEvent(
                f"{where}: data[{MARK!r}] is kept for sealed personal fields, and holds one "
                f"sealed with key {error.key_id} that {error.reason} (key store {keys}): "
                "no reader could read the event. Store such a payload under another key"
            ) from error


def _subjects(plans: list[_Plan]) -> set[str]:
    return {subject for _, _, groups in plans for subject in groups}


def _data_of(batch: PreparedBatch, plans: list[_Plan]) -> list[dict[str, Any]]:
    """The data of each planned event as the store keeps it, before it is sealed."""
    data = []
    for index, event, _ in plans:
        assert isinstance(event.data, BaseModel)
        data.append(model_data(event.data, f"{_new_where(batch.stream_id, index, event)}: data"))
    return data


def _apply(
    batch: PreparedBatch,
    plans: list[_Plan],
    data: list[dict[str, Any]],
    keys: Mapping[str, tuple[str, AESGCM]],
) -> None:
    events = list(batch.events)
    for (index, event, groups), plain in zip(plans, data, strict=True):
        sealed = seal(plain, groups, keys)
        events[index] = NewEvent(event.type, sealed, event.metadata, event.id, event.recorded_at)
    batch.replace_events(events)


def _groups(
    data: Any, stream_id: str, where: Callable[[], str]
) -> dict[str, list[PersonalField]] | None:
    """The personal fields of a model by subject; None for a model with none (or no model)."""
    if not isinstance(data, BaseModel):
        return None
    fields = personal_fields(type(data))
    if not fields:
        return None
    groups: dict[str, list[PersonalField]] = {}
    for field in fields:
        groups.setdefault(subject_of(field, data, stream_id, where()), []).append(field)
    return groups


def _new_where(stream_id: str, index: int, event: NewEvent) -> str:
    return f"event {index} ({event.type!r}) for stream {stream_id!r}"


def _take(items: Iterator[T]) -> list[T]:
    return list(islice(items, CHUNK))


class _Kind(Generic[T]):
    """How one kind of item read holds its data: decoded, or as JSON text."""

    def __init__(
        self,
        mark: str,
        data_of: Callable[[T], dict[str, Any]],
        where: Callable[[T], str],
        rebuilt: Callable[[T, dict[str, Any]], T],
    ) -> None:
        self._mark = mark
        """What an item's field holds if the item may be sealed: the cheap test."""
        self._data_of = data_of
        self._where = where
        self._rebuilt = rebuilt

    def any_marked(self, chunk: list[T]) -> bool:
        """Whether any item of `chunk` may be sealed: one membership test each."""
        mark = self._mark
        # A loop, not any() over a generator expression, which costs every event a resume.
        for item in chunk:  # noqa: SIM110
            if mark in item.data:
                return True
        return False

    def sealed(self, chunk: list[T]) -> tuple[dict[int, dict[str, Any]], set[str]]:
        """The data of the sealed items of `chunk` by index, and the key ids they name."""
        sealed: dict[int, dict[str, Any]] = {}
        wanted: set[str] = set()
        mark = self._mark
        for index, item in enumerate(chunk):
            if mark in item.data:
                data = self._data_of(item)
                if MARK in data:  # not the mark deeper down, or inside a string
                    sealed[index] = data
                    wanted.update(key_ids(data, functools.partial(self._where, item)))
        return sealed, wanted

    def opened(
        self, chunk: list[T], sealed: dict[int, dict[str, Any]], ciphers: dict[str, Any]
    ) -> list[T]:
        result = list(chunk)
        for index, data in sealed.items():
            item = chunk[index]
            where = functools.partial(self._where, item)
            result[index] = self._rebuilt(item, opened(data, ciphers, where))
        return result


def _recorded_where(event: RecordedEvent) -> str:
    return f"the event at position {event.position} (stream {event.stream_id!r})"


def _recorded(event: RecordedEvent, data: dict[str, Any]) -> RecordedEvent:
    return RecordedEvent(
        event.id,
        event.stream_id,
        event.version,
        event.position,
        event.type,
        data,
        event.metadata,
        event.recorded_at,
        event.tags,
    )


_RECORDED: _Kind[RecordedEvent] = _Kind(MARK, lambda event: event.data, _recorded_where, _recorded)


# A stream's own, kept for the streams read most: an aggregate load reads a short stream,
# and making one costs as much as checking ten events.
@functools.lru_cache(maxsize=4096)
def _encoded_kind(stream_id: str) -> _Kind[EncodedEvent]:
    return _Kind(
        TEXT_MARK,
        lambda event: orjson.loads(event.data),
        lambda event: f"event {event.version} of stream {stream_id!r}",
        lambda event, data: event._replace(data=orjson.dumps(data).decode()),
    )


_RECORD: _Kind[EncodedRecord] = _Kind(
    TEXT_MARK,
    lambda record: orjson.loads(record.data),
    lambda record: f"the event at position {record.position} (stream {record.stream_id!r})",
    lambda record, data: record._replace(data=orjson.dumps(data).decode()),
)


def _snapshot_ids(snapshot: Snapshot) -> list[str]:
    return key_ids(snapshot.data, lambda: f"the snapshot of stream {snapshot.stream_id!r}")


def _opened_snapshot(snapshot: Snapshot, ciphers: dict[str, Any]) -> Snapshot:
    data = opened(snapshot.data, ciphers, lambda: f"the snapshot of stream {snapshot.stream_id!r}")
    return Snapshot(
        snapshot.stream_id,
        snapshot.version,
        snapshot.type,
        snapshot.schema_version,
        data,
        snapshot.recorded_at,
    )
