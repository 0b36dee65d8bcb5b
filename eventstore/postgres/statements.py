"""The PostgreSQL store's SQL and what its answers mean, for the sync and async backends.

Both backends run these very strings and decode rows with these very
factories; they differ only in how they wait for the server.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from itertools import repeat
from typing import Any, NamedTuple, TypeVar

import orjson
import psycopg
from psycopg.abc import Buffer

from .. import events, json_lines
from ..encoding import PreparedEvent
from ..errors import AppendOutcomeUnknown, EventStoreError
from ..events import (
    ANY,
    EVENT_VERSION,
    AppendResult,
    EncodedEvent,
    EncodedRecord,
    RecordedEvent,
    StreamState,
)
from ..query import Query
from ..sql import deletion, schema, stream_listing
from .keyed_indexes import matches

PAGE = 2000
"""Rows a read fetches in one statement."""

PART = 250
"""Events an append sends in one call of the append function; a larger batch goes in
several, in one transaction, each encoded while the server writes the one before."""

ANY_TRIES = 100
"""Appends at ANY that lose the race for the stream's next version before giving up."""

R = TypeVar("R")

E = schema.EVENTS
COLUMNS = (
    "id, stream_id, version, position, type, data::text, nullif(metadata, '{}')::text, "
    "recorded_at, tags"
)
"""What a read of events selects. The JSON comes as text (the same bytes jsonb's binary
form carries, after a version byte) and `recorded_page` decodes it with one call of
orjson each, where psycopg's jsonb loader would add a Python call per value. Empty
metadata, most events', comes as NULL: the server spent more writing out `{}` than
comparing (0.2 ms of a 1,000-event page)."""

_DELETED = deletion.deleted_version("%(stream)s")
"""A stream read shows its versions above this: those of a deleted stream are hidden."""
STORED_IDS = f"SELECT id, stream_id, version, position FROM {E} WHERE id = ANY(%s)"
EVENT_BY_ID = f"SELECT {COLUMNS} FROM {E} WHERE id = %s"
STREAM_VERSION = deletion.stream_version("%s")
# Saves only if the stream has reached the version; returns the stream's
# version, so the caller can tell a refusal from an older snapshot kept.
SAVE_SNAPSHOT = f"""
WITH stream AS (SELECT coalesce(max(version), 0) AS version FROM {E} WHERE stream_id = %(stream)s
    AND version > {_DELETED}),
saved AS (
    INSERT INTO {schema.SNAPSHOTS} AS s
        (stream_id, version, type, schema_version, data, recorded_at)
    SELECT %(stream)s, %(version)s, %(type)s, %(schema_version)s, %(data)s::jsonb, now()
    FROM stream WHERE stream.version >= %(version)s
    ON CONFLICT (stream_id) DO UPDATE SET version = excluded.version, type = excluded.type,
        schema_version = excluded.schema_version, data = excluded.data,
        recorded_at = excluded.recorded_at
    WHERE excluded.version >= s.version
)
SELECT version FROM stream
"""
LOAD_SNAPSHOT = f"""
SELECT stream_id, version, type, schema_version, data, recorded_at
FROM {schema.SNAPSHOTS} WHERE stream_id = %s AND {deletion.SNAPSHOT_SHOWN}
"""
READ_STREAM_FORWARDS = (
    f"SELECT {COLUMNS} FROM {E} WHERE stream_id = %(stream)s AND version > {_DELETED} "
    "AND version >= %(start)s ORDER BY version LIMIT %(count)s"
)
READ_STREAM_BACKWARDS = (
    f"SELECT {COLUMNS} FROM {E} WHERE stream_id = %(stream)s AND version > {_DELETED} "
    "AND version <= %(start)s ORDER BY version DESC LIMIT %(count)s"
)
READ_STREAM_ENCODED = (
    f"SELECT version, type, data::text, (metadata->'{EVENT_VERSION}')::text FROM {E} "
    f"WHERE stream_id = %(stream)s AND version > {_DELETED} AND version >= %(start)s "
    "ORDER BY version LIMIT %(count)s"
)
READ_QUERY = (
    f"SELECT {COLUMNS} FROM (SELECT DISTINCT p FROM eventcraft_query_positions("
    "%(query)s::jsonb, %(start)s, %(last)s, %(count)s) AS p ORDER BY p LIMIT %(count)s) AS q "
    f"JOIN {E} ON position = q.p ORDER BY position"
)
"""A page of `read_query`: the events matching `query` (`group.query_json`) in
(`start`, `last`]; postgres/tag_functions.py has the rule in SQL."""
LAST_VERSION = 1 << 62
"""Where a backwards read without `from_version` starts."""


def read_all_query(
    categories: Sequence[str] | None, types: Sequence[str] | None
) -> tuple[str, dict[str, Any]]:
    """The paged query of `read_all` and its parameters but `start` and `count`.

    A filtered read walks the index of what it filters on, one branch per
    category (or type) compared with `=`, each branch already in position
    order: `category = ANY(...)` cannot come out of the category index
    (`keyed_indexes.py`) in order, and on a large log the planner then walks the whole
    primary key instead, reading every row of the other categories to fill
    a page of a rare one.
    """
    # No `position <= head` in SQL: with a range on both sides (and stale
    # statistics, or a generic plan) the planner expects a few rows and
    # sorts all the rows past `start` for every page. The few rows past
    # the head that a page may bring are dropped by the caller instead.
    page = "ORDER BY position LIMIT %(count)s"
    params: dict[str, Any] = {}
    if categories is None and types is None:
        return f"SELECT {COLUMNS} FROM {E} WHERE position > %(start)s {page}", params
    branches = [
        f"SELECT {COLUMNS} FROM {E} WHERE {name} AND position > %(start)s{also} {page}"
        for name, also in _branches(categories, types, params)
    ]
    if len(branches) == 1:
        return branches[0], params
    union = " UNION ALL ".join(f"({branch})" for branch in branches)
    return f"SELECT * FROM ({union}) AS branches {page}", params


def count_query(
    categories: Sequence[str] | None, types: Sequence[str] | None
) -> tuple[str, dict[str, Any]]:
    """How many events `read_all_query` brings in (`start`, `last`], each branch counting
    at most `count` (NULL: all); its parameters but those three.

    A count walks the same index range as the read, without ORDER BY: with
    nothing to sort, both bounds of the range are safe in SQL. Branches of
    several categories (or types) are summed, which may pass `count`; the
    caller takes the least.
    """
    where = "position > %(start)s AND position <= %(last)s"
    params: dict[str, Any] = {}
    if categories is None and types is None:
        return f"SELECT count(*) FROM (SELECT FROM {E} WHERE {where} LIMIT %(count)s) AS c", params
    counts = [
        f"(SELECT count(*) FROM (SELECT FROM {E} WHERE {name} AND {where}{also} "
        f"LIMIT %(count)s) AS c{n})"
        for n, (name, also) in enumerate(_branches(categories, types, params))
    ]
    return f"SELECT {' + '.join(counts)}", params


def count_types_query(types: Sequence[str] | None) -> tuple[str, dict[str, Any]]:
    """The events in (`start`, `last`] (of `types`, if given) counted by type and the
    metadata's `EVENT_VERSION` as JSON text (`->`, which tells `2` from `"2"`), each group
    with its last position and when that event was recorded; its parameters but those two.

    One scan of the range (of the type index's ranges, with `types`), then a probe of
    the primary key for each group's last event: a subquery, not a join, as the planner
    cannot estimate how few the groups are (it expected a group a row on a log of 1M
    events and hashed the whole table a second time to join them, 40% of the time).
    """
    where = "position > %(start)s AND position <= %(last)s"
    params: dict[str, Any] = {}
    if types is not None:
        each = []
        for n, value in enumerate(dict.fromkeys(types)):
            params[f"v{n}"] = value
            each.append(f"({matches('type', f'%(v{n})s')})")
        where += f" AND ({' OR '.join(each)})"
    return (
        f"WITH counted AS (SELECT type, (metadata -> '{EVENT_VERSION}')::text AS event_version, "
        f"count(*) AS events, max(position) AS last FROM {E} WHERE {where} GROUP BY 1, 2) "
        "SELECT type, event_version, events, last, "
        f"(SELECT recorded_at FROM {E} WHERE position = counted.last) FROM counted",
        params,
    )


def _branches(
    categories: Sequence[str] | None, types: Sequence[str] | None, params: dict[str, Any]
) -> list[tuple[str, str]]:
    """A branch per category (or, without categories, per type), each its index's
    condition and, with both given, the types' check the branch adds; their values go
    into `params`."""
    column, values = ("category", categories) if categories is not None else ("type", types)
    assert values is not None
    also = ""
    if categories is not None and types is not None:
        also = " AND type = ANY(%(types)s)"
        params["types"] = list(types)
    branches = []
    for n, value in enumerate(dict.fromkeys(values)):
        params[f"v{n}"] = value
        branches.append((matches(column, f"%(v{n})s"), also))
    return branches


ENCODED_SPAN = 50_000
"""Positions `read_all_encoded` copies in one statement."""

_COPY_ESCAPE = re.compile(r"\\(.)")
_COPY_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def _unescaped(field: str) -> str:
    """A field of COPY's text format as it was: COPY TO writes a backslash before a
    backslash and names control characters (never octal or hex, says its manual)."""
    return _COPY_ESCAPE.sub(lambda match: _COPY_ESCAPES.get(match[1], match[1]), field)


def copied_record(row: Buffer) -> EncodedRecord:
    """The `EncodedRecord` of one row of `read_all_encoded_query`'s COPY.

    Split here rather than by psycopg's row parser, which costs three times
    as much a row: a pass over the log spends most of its time here.
    """
    line = str(row, "utf-8")
    fields = line[:-1].split("\t")  # a row ends in a newline; tabs inside are escaped
    if "\\" in line:
        fields = [_unescaped(field) for field in fields]
    position, event_id, stream_id, version, type, data, metadata, recorded_at, tags = fields
    return _record(
        EncodedRecord,
        (
            int(position),
            event_id,
            stream_id,
            int(version),
            type,
            data,
            metadata,
            recorded_at,
            tuple(_loads(tags)) if tags else (),
        ),
    )


_record = tuple.__new__


def copied_line(row: Buffer) -> str:
    """The JSON line (`json_lines`) of one row of `read_all_encoded_query`'s COPY: what
    `copied_record` reads, written as a line without an `EncodedRecord` between."""
    text = str(row, "utf-8")
    fields = text[:-1].split("\t")
    if "\\" in text:
        fields = [_unescaped(field) for field in fields]
    position, event_id, stream_id, version, type, data, metadata, recorded_at, tags = fields
    return _line(
        position, event_id, stream_id, version, type, data, metadata, recorded_at, tags or "[]"
    )


_line = json_lines.line


class StreamRead(NamedTuple):
    """How `read_stream` pages through a stream: its query, parameters, first key and the
    key after a row."""

    query: str
    params: dict[str, Any]
    start: int
    next_start: Callable[[RecordedEvent], int]


def read_stream_plan(stream_id: str, from_version: int | None, backwards: bool) -> StreamRead:
    params = {"stream": stream_id}
    if backwards:
        start = LAST_VERSION if from_version is None else from_version
        return StreamRead(READ_STREAM_BACKWARDS, params, start, version_before)
    return StreamRead(READ_STREAM_FORWARDS, params, from_version or 1, version_after)


def encoded_spans(
    params: dict[str, Any], after: int, until: int | None, head: int
) -> Iterator[dict[str, Any]]:
    """The parameters of `read_all_encoded_query` for each span of positions after `after`
    up to `until` or, when None or beyond it, the safe `head`; `ENCODED_SPAN` positions
    at a time."""
    last = head if until is None else min(until, head)
    start = after
    while start < last:
        end = min(start + ENCODED_SPAN, last)
        yield {**params, "start": start, "end": end}
        start = end


def read_all_encoded_query(
    categories: Sequence[str] | None, types: Sequence[str] | None
) -> tuple[str, dict[str, Any]]:
    """The COPY of `read_all_encoded` from `start` (exclusive) to `end`, and its parameters.

    COPY rather than SELECT: the rows arrive as one stream of text that
    psycopg splits in C, which makes a pass over the whole log several
    times cheaper. The time is formatted here as `recorded_at_text` does, the tags as a
    JSON array, and as an empty field when there are none: COPY's `\\N` for NULL would
    send every untagged row through `_unescaped`.
    """
    filters = ""
    params: dict[str, Any] = {}
    if categories is not None:
        filters += " AND category = ANY(%(categories)s)"
        params["categories"] = list(categories)
    if types is not None:
        filters += " AND type = ANY(%(types)s)"
        params["types"] = list(types)
    moment = """to_char(recorded_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"')"""
    query = (
        f"COPY (SELECT position, id, stream_id, version, type, data, metadata, {moment}, "
        "coalesce(array_to_json(tags)::text, '') "
        f"FROM {E} WHERE position > %(start)s AND position <= %(end)s{filters} "
        "ORDER BY position) TO STDOUT"
    )
    return query, params


def list_streams_query(
    category: str | None, after: str | None, limit: int | None
) -> tuple[str, dict[str, Any]]:
    return stream_listing.list_streams_query(category, after, limit, "%({})s".format)


def snapshot_params(
    stream_id: str, version: int, type: str, schema_version: int, data: bytes
) -> dict[str, Any]:
    return {
        "stream": stream_id,
        "version": version,
        "type": type,
        "schema_version": schema_version,
        "data": data.decode(),
    }


def append_head(stream_id: str, category: str, expected: int | StreamState) -> tuple[bytes, ...]:
    """The append function's first three parameters, as text."""
    return (stream_id.encode(), category.encode(), b"%d" % expected_code(expected))


def expected_code(expected: int | StreamState) -> int:
    """The append function's expected version: `APPEND_AT_ANY`, 0 for no stream, or n."""
    if isinstance(expected, int):
        return expected
    return schema.APPEND_AT_ANY if expected is ANY else 0  # NO_STREAM is version 0


def append_result(answers: Sequence[str]) -> AppendResult:
    """The result of an append from the text answers of its calls of the function."""
    positions: list[int] = []
    version = 0
    for answer in answers:
        version, *part_positions = map(int, answer.split())
        positions += part_positions
    return AppendResult(version=version, positions=tuple(positions))


def outcome_unknown(
    stream_id: str, broken: BaseException, again: BaseException
) -> AppendOutcomeUnknown:
    """An append whose connection broke once it was sent, and whose resend failed too."""
    detail = f"the connection broke after it was sent ({broken}); the retry: {again}"
    return AppendOutcomeUnknown(stream_id, detail)


def store_error(error: psycopg.Error) -> EventStoreError:
    return EventStoreError(f"PostgreSQL event store: {error}")


def batch_json(events: Sequence[PreparedEvent], annotated: bool = False) -> bytes:
    """The events as the append function takes them: one JSON array.

    `annotated` (`PreparedBatch.annotated`): some event has a `recorded_at` or tags
    of its own; only then are those keys sent (for the events that have them), so
    the common append pays nothing for them.
    """
    if annotated:
        return orjson.dumps([_annotated_event(event) for event in events])
    return orjson.dumps(
        [
            {
                "id": event.id,
                "type": event.type,
                "data": orjson.Fragment(event.data),
                "metadata": orjson.Fragment(event.metadata),
            }
            for event in events
        ]
    )


def _annotated_event(event: PreparedEvent) -> dict[str, Any]:
    sent: dict[str, Any] = {
        "id": event.id,
        "type": event.type,
        "data": orjson.Fragment(event.data),
        "metadata": orjson.Fragment(event.metadata),
    }
    if event.recorded_at is not None:
        sent["recorded_at"] = event.recorded_at  # RFC 3339, with its offset
    if event.tags:
        sent["tags"] = event.tags
    return sent


def recorded_page(rows: Sequence[Sequence[Any]]) -> list[RecordedEvent]:
    """The events of rows that start with `COLUMNS` (any columns after them are left
    alone), a column at a time (the columns walked in C, as `sqlite_rows.recorded_page`
    does): a Python call less per event than a row factory."""
    if not rows:
        return []
    ids, streams, versions, positions, types, data, metadata, moments, tags, *_ = zip(
        *rows, strict=True
    )
    return events.recorded_events(
        ids,
        streams,
        versions,
        positions,
        types,
        map(_loads, data),
        [{} if value is None else _loads(value) for value in metadata],
        moments,
        repeat((), len(tags)) if tags.count(None) == len(tags) else map(_tags, tags),
    )


def _tags(stored: list[str] | None) -> tuple[str, ...]:
    return () if stored is None else tuple(stored)


_loads = orjson.loads


def up_to(page: list[R], head: int | None) -> list[R]:
    """`page` without the events past `head` (a page of `RecordedEvent`s when `head` is set)."""
    if head is not None:
        while page and page[-1].position > head:  # type: ignore[attr-defined]
            page.pop()  # a short page: the last one
    return page


def position(event: RecordedEvent) -> int:
    return event.position


def version_after(event: RecordedEvent | EncodedEvent) -> int:
    return event.version + 1


def version_before(event: RecordedEvent) -> int:
    return event.version - 1


def query_json(query: Query) -> list[list[tuple[str, ...]]]:
    """`query` as `eventcraft_query_positions` takes it: [[types], [tags]] per item."""
    return [[item.types, item.tags] for item in query.items]


def read_query_params(query: Query, last: int) -> dict[str, Any]:
    """`READ_QUERY`'s parameters but `start` and `count`."""
    return {"query": orjson.dumps(query_json(query)).decode(), "last": last}
