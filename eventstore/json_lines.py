"""The log as JSON lines (`read_all_json`): each event one JSON object, a line of its own.

A line holds every field of the event, keys sorted by name: `data`, `id`,
`metadata`, `position`, `recorded_at` (as `EncodedRecord.recorded_at`),
`stream_id`, `tags`, `type`, `version`. `data` and `metadata` are the JSON
the store keeps, unparsed: as given to the append on SQLite and in memory,
in jsonb's normal form on PostgreSQL (its own key order, a space after `:`
and `,`). So a line costs no parsing, one store gives the same bytes each
time, and two backends give equal documents, not always the same bytes.

Lines come in chunks (`JsonLines`), written out whole: a chunk is one string,
of `CHUNK` lines from records, of a copied span (up to 50,000 positions) on
PostgreSQL.

An export (`with_deletions`) adds a line for each deleted stream, right after
its event at the version it was deleted at (`placed_deletions` says where):
`deleted_at` (as `recorded_at`), `deletion` (`"soft"` or `"tombstone"`),
`stream_id`, `version`, keys sorted. The deletion of a stream deleted before
its first event (a tombstone, mostly) comes before the first event.
A reader tells it from an event by its `deletion` key, which no event line
has; an event line always has `data` and `position`, which no deletion line
has. So exports made before deletions were exported read as they did, and an
importer that knows no deletions refuses such a line, naming what it lacks.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice
from typing import NamedTuple

import orjson

from .deletion import StreamDeletion
from .events import EncodedRecord, recorded_at_text
from .personal.envelope import TEXT_MARK

CHUNK = 10_000
"""Most lines in one chunk made from records (`chunks_of`)."""

_NAMES_KEPT = 4096
"""Names kept as JSON once made: every event type, the streams most recently seen."""


class JsonLines(NamedTuple):
    """Consecutive events of the log as JSON lines.

    A line ends at a newline only: JSON keeps U+2028 raw inside its strings, where
    `str.splitlines` would break a line in two.

    Example::

        import json

        from eventcraft.eventstore import EventStore, NewEvent

        with EventStore.open("sqlite:///shop.db") as store:
            store.append("order-1", [NewEvent("OrderPlaced", {"cents": 1250})])
            store.append("order-2", [NewEvent("OrderPlaced", {"cents": 800})])
            (chunk,) = store.read_all_json()
        assert (chunk.events, chunk.last_position) == (2, 2)
        first = json.loads(chunk.text.split("\\n")[0])
        assert (first["stream_id"], first["data"]) == ("order-1", {"cents": 1250})
    """

    text: str
    """The lines, each ended by a newline."""
    events: int
    """How many events: one line each."""
    last_position: int
    """The position of the last event."""


def record_line(record: EncodedRecord) -> str:
    """The JSON line of an event read as stored."""
    position, id, stream_id, version, type, data, metadata, recorded_at, tags = record
    return line(position, id, stream_id, version, type, data, metadata, recorded_at, _tags(tags))


def line(
    position: object,
    id: str,
    stream_id: str,
    version: object,
    type: str,
    data: str,
    metadata: str,
    recorded_at: str,
    tags: str,
) -> str:
    """The JSON line of these fields, each as JSON text but the names and the id, and
    `position` and `version`, which print as JSON numbers."""
    return (
        f'{{"data":{data},"id":"{id}","metadata":{metadata},"position":{position},'
        f'"recorded_at":"{recorded_at}","stream_id":{json_name(stream_id)},"tags":{tags},'
        f'"type":{json_name(type)},"version":{version}}}\n'
    )


_names: dict[str, str] = {}


def json_name(name: str) -> str:
    """`name` as a JSON string, as orjson writes it."""
    made = _names.get(name)
    if made is None:
        made = orjson.dumps(name).decode()
        if len(_names) >= _NAMES_KEPT:
            _names.clear()  # streams come and go; the types come back at once
        _names[name] = made
    return made


def _tags(tags: tuple[str, ...]) -> str:
    return orjson.dumps(tags).decode() if tags else "[]"


def chunks_of(records: Iterable[EncodedRecord]) -> Iterator[JsonLines]:
    """The lines of `records`, `CHUNK` at a time."""
    records = iter(records)
    while chunk := list(islice(records, CHUNK)):
        yield chunk_of(chunk)


def chunk_of(records: Sequence[EncodedRecord]) -> JsonLines:
    """The lines of `records`, at least one, as one chunk."""
    return JsonLines("".join(map(record_line, records)), len(records), records[-1].position)


def joined(lines: Sequence[str]) -> JsonLines:
    """`lines`, at least one, as one chunk."""
    return JsonLines("".join(lines), len(lines), _last_position(lines[-1]))


def _last_position(line: str) -> int:
    """The position of `line`: its last `,"position":`, as a name, the only other text
    after `data` that could hold one, writes its quotes escaped."""
    start = line.rindex(',"position":') + len(',"position":')
    return int(line[start : line.index(",", start)])


def deletion_line(deletion: StreamDeletion) -> str:
    """The JSON line of a stream's deletion (see the module's docstring)."""
    kind = "tombstone" if deletion.tombstone else "soft"
    return (
        f'{{"deleted_at":"{recorded_at_text(deletion.deleted_at)}","deletion":"{kind}",'
        f'"stream_id":{json_name(deletion.stream_id)},"version":{deletion.version}}}\n'
    )


def with_deletions(text: str, placed: Sequence[tuple[int, StreamDeletion]]) -> str:
    """`text`'s event lines with the line of each of `placed`'s deletions right after the
    line of its position (`EventStore.placed_deletions`: each in `text`, in order)."""
    if not placed:
        return text
    lines = _lines(text)
    # Lines are in position order: a binary search, reading a few lines' positions.
    spots = range(len(lines))
    at = [bisect_left(spots, p, key=lambda n: _last_position(lines[n])) for p, _ in placed]
    for n, (position, deletion) in zip(reversed(at), reversed(placed), strict=True):
        # From the end, so that the indexes before still hold.
        if n == len(lines) or _last_position(lines[n]) != position:
            raise ValueError(f"no line of position {position} to put its deletion after")
        lines.insert(n + 1, deletion_line(deletion))
    return "".join(lines)


def with_placed(
    chunks: Iterable[JsonLines], placed: Sequence[tuple[int, StreamDeletion]]
) -> Iterator[tuple[str, JsonLines, int]]:
    """Each of `chunks`, its text with the lines of those of `placed` (in position order, each
    at an event of `chunks`, or at position 0: before them all) that fall in it, and how
    many did; a log without events gives those at position 0 a chunk of their own.

    Example::

        import json

        from eventcraft.eventstore import EventStore, NewEvent, with_placed

        with EventStore.open("sqlite:///shop.db") as store:
            store.append("cart-7", [NewEvent("ItemAdded", {"sku": "tea"})])
            store.delete_stream("cart-7")
            store.append("order-1", [NewEvent("OrderPlaced", {"cents": 1250})])
            end = store.high_water_mark()
            chunks, placed = store.read_all_json(0, end), store.placed_deletions(0, end)
            [(text, chunk, added)] = with_placed(chunks, placed)
        lines = [json.loads(line) for line in text.split("\\n") if line]
        assert [line.get("type", line.get("deletion")) for line in lines] == [
            "ItemAdded", "soft", "OrderPlaced"
        ]
        assert (chunk.events, added) == (2, 1)
    """
    pending = deque(placed)
    first: list[str] = []
    while pending and pending[0][0] == 0:
        first.append(deletion_line(pending.popleft()[1]))
    for chunk in chunks:
        here = []
        while pending and pending[0][0] <= chunk.last_position:
            here.append(pending.popleft())
        yield "".join(first) + with_deletions(chunk.text, here), chunk, len(first) + len(here)
        first = []
    if first:
        yield "".join(first), JsonLines("", 0, 0), len(first)


def holds_sealed(chunk: JsonLines) -> bool:
    """Whether any line of `chunk` holds a sealed personal field (one search of its text)."""
    return TEXT_MARK in chunk.text


def opened(
    chunk: JsonLines, open_records: Callable[[Iterator[EncodedRecord]], Iterator[EncodedRecord]]
) -> JsonLines:
    """`chunk` with the lines of sealed events made again from their records as
    `open_records` opens them; a chunk without any, as it is."""
    if not holds_sealed(chunk):
        return chunk
    lines = _lines(chunk.text)
    marked = [n for n, text in enumerate(lines) if TEXT_MARK in text]
    records = open_records(iter([_record(lines[n]) for n in marked]))
    for n, record in zip(marked, records, strict=True):
        lines[n] = record_line(record)
    return chunk._replace(text="".join(lines))


def _lines(text: str) -> list[str]:
    """`text`'s lines, each with its newline. Only a newline ends one: JSON keeps U+2028,
    U+2029 and U+0085 raw inside its strings, where `str.splitlines` would break."""
    lines = text.split("\n")
    last = lines.pop()
    return [line + "\n" for line in lines] + ([last] if last else [])


def _record(text: str) -> EncodedRecord:
    document = orjson.loads(text)
    return EncodedRecord(
        document["position"],
        document["id"],
        document["stream_id"],
        document["version"],
        document["type"],
        orjson.dumps(document["data"]).decode(),
        orjson.dumps(document["metadata"]).decode(),
        document["recorded_at"],
        tuple(document["tags"]),
    )
