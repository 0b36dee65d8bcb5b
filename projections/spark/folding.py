"""The executor side of a replay: key the events, fold each key's events, write the rows.

This runs a `Fold`'s own three functions, so the rows equal what the
in-process runner writes: for each key, its events in position order,
`initial(key)` when the key has no state (at first, or after `apply`
returned None), then `apply(state, event)`.

Keys travel between the two stages as tagged text (`encode_key`), which
round-trips the scalar keys a one-column primary key holds (str, int of
any size, float) and makes two keys one exactly when Python's dict would:
floats are first put in `fold.normal_key`'s form, so `1.0` joins `1` and
`-0.0` joins `0`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa
from eventcraft.eventstore import RecordedEvent

from ..database import Database, engine_for
from ..definition import note_failure
from ..errors import DefinitionError
from ..fold import Fold, State, normal_key
from ..fold_keys import StreamKey
from ..typed_event import EventDecoder, TypedEvent
from .rows import events_of, probes_of

KEYED_DDL = "key string"
"""The column the keying stage adds to the event schema."""
WRITTEN_DDL = "rows long, events long"

_INSERT_CHUNK = 5000
_databases: dict[str, Database] = {}
_databases_lock = threading.Lock()


@dataclass(frozen=True)
class FoldTask:
    """What an executor needs of a fold: its functions, and where its rows go."""

    name: str
    key: Callable[[Any], Hashable | None]
    initial: Callable[[Any], State]
    evolve: Callable[[State, Any], State | None]
    key_column: str
    table: sa.Table
    """The table of the generation being filled."""
    database_url: str
    json_keys: bool
    """Keys arrive as JSON text (from `keyed`), not as the key itself (a `StreamKey`)."""
    registry: EventDecoder | None = None
    """The fold's registry: `key` and `evolve` take each event typed by it, as in process."""

    def delivered(self, event: RecordedEvent) -> RecordedEvent | TypedEvent[Any]:
        """`event` as the fold's functions receive it (`Fold.registry`)."""
        return event if self.registry is None else TypedEvent.decoded(self.registry, event)

    @classmethod
    def of(cls, fold: Fold, table: sa.Table, database_url: str) -> FoldTask:
        return cls(
            fold.name,
            fold.key,
            fold.initial,
            fold.evolve,
            fold.key_column,
            table,
            database_url,
            json_keys=not isinstance(fold.key, StreamKey),
            registry=fold.registry,
        )


def keyed(task: FoldTask, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Stage 1: each event with its key; events the fold does not key are dropped."""
    for batch in batches:
        keys = []
        for event in probes_of(batch):
            try:
                keys.append(_encoded(task, task.key(task.delivered(event))))
            except Exception as error:
                note_failure(error, task.name, event)
                raise
        with_keys = batch.append_column("key", pa.array(keys, pa.string()))
        yield with_keys.filter(pc.is_valid(with_keys.column("key")))


def fold_and_write(task: FoldTask, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Stage 2: batches sorted by (key, position) folded, and the rows inserted.

    One transaction per task: a task that fails writes nothing, and a
    retried task starts again from an empty slate.
    """
    rows: list[State] = []
    events = 0
    current: str | None = None
    key: Any = None
    state: State | None = None
    initial, evolve, column = task.initial, task.evolve, task.key_column
    decode = decode_key if task.json_keys else str
    for batch in batches:
        for encoded, event in zip(batch.column("key").to_pylist(), events_of(batch), strict=True):
            if encoded != current:
                if state is not None:
                    rows.append({**state, column: key})
                current, key, state = encoded, decode(encoded), None
            try:
                if state is None:
                    state = initial(key)
                state = evolve(state, task.delivered(event))
            except Exception as error:
                note_failure(error, task.name, event)
                raise
            events += 1
    if state is not None:
        rows.append({**state, column: key})
    _insert(task, rows)
    yield pa.RecordBatch.from_pydict(
        {"rows": pa.array([len(rows)], pa.int64()), "events": pa.array([events], pa.int64())}
    )


def _encoded(task: FoldTask, key: Hashable | None) -> str | None:
    if key is None:
        return None
    return encode_key(task.name, key)


def encode_key(name: str, key: Hashable) -> str:
    """`key` as text that sorts and groups as Python's equality does: `s…`, `i…` or `f…`."""
    if isinstance(key, str):
        return "s" + key
    if isinstance(key, float):
        key = normal_key(name, float(key))
    if isinstance(key, int) and not isinstance(key, bool):
        return f"i{int(key)}"
    if isinstance(key, float):
        return f"f{float(key)!r}"
    raise DefinitionError(
        f"{name}: a Spark replay needs keys that are str, int or float, "
        f"not {type(key).__name__} ({key!r})"
    )


def decode_key(text: str) -> str | int | float:
    tag, value = text[0], text[1:]
    if tag == "s":
        return value
    return int(value) if tag == "i" else float(value)


def _insert(task: FoldTask, rows: list[State]) -> None:
    if not rows:
        return
    database = _database(task.database_url)
    with database.transaction() as connection:
        for start in range(0, len(rows), _INSERT_CHUNK):
            connection.execute(sa.insert(task.table), rows[start : start + _INSERT_CHUNK])


def _database(url: str) -> Database:
    """One engine per URL per Python worker, which Spark reuses from task to task."""
    with _databases_lock:
        database = _databases.get(url)
        if database is None:
            database = _databases[url] = Database(engine_for(url))
        return database
