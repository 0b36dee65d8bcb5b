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

Each operation is written once, for both faces, as steps (`Steps`): a
generator that does the work, sealing and opening (CPU work alone), and
yields each call it needs made on the key store, the only input and output
there is, to be sent back its answer. The sync face makes those calls at
once (`_run`); the async face makes them in a thread (`_run_async`), so
that the event loop goes on meanwhile. The key store is synchronous: its
table is read through each backend's sync connections (SQLite's,
psycopg's) and its cache is shared by a store's threads under a lock; an
async key table per backend would double that code for a call that a read
makes at most once a chunk, and that the cache mostly answers.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from collections.abc import AsyncIterator, Callable, Collection, Generator, Iterator, Mapping
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
R = TypeVar("R")

Steps = Generator[Callable[[], Any], Any, R]
"""An operation written once for both faces: it yields each call it needs made on the key
store (a function of no arguments), is sent back what the call returned, and returns its
result. `_run` and `_run_async` make the calls."""


class Shredder:
    """Seals and opens one store's personal fields with the keys of `keys`.

    Each operation has a sync face and an async one (`*_async`) over the same steps:
    the async face asks the key store from a thread."""

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
        _run(self._seal_batch(batch))

    async def seal_batch_async(self, batch: PreparedBatch) -> None:
        await _run_async(self._seal_batch(batch))

    def seal_snapshot(
        self, stream_id: str, data: dict[str, Any] | BaseModel
    ) -> dict[str, Any] | BaseModel:
        """`data` with its personal fields sealed; subjects default to `stream_id`."""
        return _run(self._seal_snapshot(stream_id, data))

    async def seal_snapshot_async(
        self, stream_id: str, data: dict[str, Any] | BaseModel
    ) -> dict[str, Any] | BaseModel:
        return await _run_async(self._seal_snapshot(stream_id, data))

    def forget(self, subject: str) -> int:
        """Delete `subject`'s key; how many keys were erased (0: none, or forgotten)."""
        return _run(self._forget(subject))

    async def forget_async(self, subject: str) -> int:
        return await _run_async(self._forget(subject))

    # --- reading -------------------------------------------------------------

    def opened(self, events: Iterator[RecordedEvent]) -> Iterator[RecordedEvent]:
        return events if self.sealed else self._opened(events, _RECORDED)

    def opened_async(self, events: AsyncIterator[RecordedEvent]) -> AsyncIterator[RecordedEvent]:
        return events if self.sealed else self._opened_async(events, _RECORDED)

    def opened_encoded(
        self, stream_id: str, events: Iterator[EncodedEvent]
    ) -> Iterator[EncodedEvent]:
        return events if self.sealed else self._opened(events, _encoded_kind(stream_id))

    def opened_encoded_async(
        self, stream_id: str, events: AsyncIterator[EncodedEvent]
    ) -> AsyncIterator[EncodedEvent]:
        return events if self.sealed else self._opened_async(events, _encoded_kind(stream_id))

    def opened_records(self, records: Iterator[EncodedRecord]) -> Iterator[EncodedRecord]:
        return records if self.sealed else self._opened(records, _RECORD)

    def opened_records_async(
        self, records: AsyncIterator[EncodedRecord]
    ) -> AsyncIterator[EncodedRecord]:
        return records if self.sealed else self._opened_async(records, _RECORD)

    def opened_event(self, event: RecordedEvent | None) -> RecordedEvent | None:
        return _run(self._open_one(_RECORDED, event))

    async def opened_event_async(self, event: RecordedEvent | None) -> RecordedEvent | None:
        return await _run_async(self._open_one(_RECORDED, event))

    def opened_snapshot(self, snapshot: Snapshot | None) -> Snapshot | None:
        return _run(self._open_one(_SNAPSHOT, snapshot))

    async def opened_snapshot_async(self, snapshot: Snapshot | None) -> Snapshot | None:
        return await _run_async(self._open_one(_SNAPSHOT, snapshot))

    def _opened(self, items: Iterator[T], kind: _Kind[T]) -> Iterator[T]:
        # Iterated in C, chunk by chunk: a plain event costs one membership test and
        # no Python frame, which a generator here would add to every event.
        chunks = iter(functools.partial(_take, items), [])
        return chain.from_iterable(
            map(_run, map(functools.partial(self._open_chunk, kind), chunks))
        )

    async def _opened_async(self, items: AsyncIterator[T], kind: _Kind[T]) -> AsyncIterator[T]:
        chunk: list[T] = []
        async for item in items:
            chunk.append(item)
            if len(chunk) == CHUNK:
                for ready in await _run_async(self._open_chunk(kind, chunk)):
                    yield ready
                chunk = []
        for ready in await _run_async(self._open_chunk(kind, chunk)):
            yield ready

    # --- the steps of each operation, for both faces --------------------------

    def _seal_batch(self, batch: PreparedBatch) -> Steps[None]:
        plans, given = _plans(batch)
        if given:
            yield from self._check_given(given)
        if plans:
            data = _data_of(batch, plans)  # refused before a key is made
            _apply(batch, plans, data, (yield from self._sealing(_subjects(plans))))

    def _seal_snapshot(
        self, stream_id: str, data: dict[str, Any] | BaseModel
    ) -> Steps[dict[str, Any] | BaseModel]:
        given = _given_snapshot(stream_id, data)
        if given:
            yield from self._check_given(given)
        groups = _groups(data, stream_id, lambda: f"snapshot of stream {stream_id!r}")
        if not groups:
            return data
        assert isinstance(data, BaseModel)
        dumped = model_data(data, f"snapshot of stream {stream_id!r}: data")
        return seal(dumped, groups, (yield from self._sealing(list(groups))))

    def _forget(self, subject: str) -> Steps[int]:
        check_name("subject", subject)  # before the key store is opened
        erased: int = yield functools.partial(self.keys.forget, subject)
        return erased

    def _open_one(self, kind: _Kind[T], item: T | None) -> Steps[T | None]:
        if item is None or self.sealed:
            return item
        return (yield from self._open_chunk(kind, [item]))[0]

    def _open_chunk(self, kind: _Kind[T], chunk: list[T]) -> Steps[list[T]]:
        if not kind.any_marked(chunk):
            return chunk
        sealed, wanted = kind.sealed(chunk)
        if not sealed:
            return chunk
        return kind.opened(chunk, sealed, (yield from self._opening(wanted)))

    def _check_given(self, given: list[_Given]) -> Steps[None]:
        """Refuse given envelopes that a reader of this store could not open: each is opened
        here as a reader would (a forgotten key's fields read as their replacement)."""
        ciphers = yield from self._opening(_given_ids(given))
        for where, data in given:
            try:
                opened(data, ciphers, lambda: where)  # noqa: B023 - called before the next turn
            except UnreadablePersonalData as error:
                raise InvalidEvent(
                    f"{where}: data[{MARK!r}] is kept for sealed personal fields, and holds one "
                    f"sealed with key {error.key_id} that {error.reason} (key store "
                    f"{self.keys.url}): no reader could read the event. Store such a payload "
                    "under another key"
                ) from error

    def _opening(self, wanted: Collection[str]) -> Steps[dict[str, AESGCM | None]]:
        """`KeyStore.opening`: the ciphers of the key ids `wanted`."""
        ciphers: dict[str, AESGCM | None] = yield functools.partial(self.keys.opening, wanted)
        return ciphers

    def _sealing(self, subjects: Collection[str]) -> Steps[dict[str, tuple[str, AESGCM]]]:
        """`KeyStore.sealing`: the live key of each subject, made where there is none."""
        keys: dict[str, tuple[str, AESGCM]] = yield functools.partial(self.keys.sealing, subjects)
        return keys


def _run(steps: Steps[R]) -> R:
    """What `steps` return, each key store call made on this thread: the sync face."""
    try:
        call = next(steps)
        while True:  # a key store call raises no StopIteration
            call = steps.send(call())
    except StopIteration as done:
        result: R = done.value
        return result


async def _run_async(steps: Steps[R]) -> R:
    """What `steps` return, each key store call made in a thread (the key store is
    synchronous): the async face, whose event loop goes on meanwhile."""
    try:
        call = next(steps)
        while True:
            call = steps.send(await asyncio.to_thread(call))
    except StopIteration as done:
        result: R = done.value
        return result


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
        self,
        chunk: list[T],
        sealed: dict[int, dict[str, Any]],
        ciphers: Mapping[str, AESGCM | None],
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


_SNAPSHOT: _Kind[Snapshot] = _Kind(
    MARK,
    lambda snapshot: snapshot.data,
    lambda snapshot: f"the snapshot of stream {snapshot.stream_id!r}",
    lambda snapshot, data: dataclasses.replace(snapshot, data=data),
)
