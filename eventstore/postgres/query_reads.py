"""Reads by query on PostgreSQL: what the sync and async backends share.

A query whose items all have tags is read under the tag locks a condition on
it would take (`eventcraft_read_locked`, `postgres/tag_functions.py` says why): its first
page and its head come in one statement, the head at the top of the log
whatever other writers are doing, so a decision needs one round trip to read
and one to append. The rest of a long read, and a query with an item without
tags, are read in pages up to a head like `read_all`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import orjson

from ..events import RecordedEvent
from ..query import Query
from . import statements as sql
from .tag_locks import condition_tags, lock_key

READ_LOCKED = (
    "SELECT id, stream_id, version, position, type, data, metadata, recorded_at, tags, head "
    "FROM eventcraft_read_locked(%(query)s::jsonb, %(keys)s, %(start)s, %(count)s)"
)


class LockedPage(NamedTuple):
    """The first page of a locked read, and the head it covered."""

    events: list[RecordedEvent]
    head: int


def locked_params(query: Query, after: int, count: int) -> dict[str, Any] | None:
    """`READ_LOCKED`'s parameters for the first `count` events of `query` after `after`;
    None when an item has no tags (no tag lock covers its writers)."""
    tags = condition_tags(query)
    if tags is None:
        return None
    return {
        "query": orjson.dumps(sql.query_json(query)).decode(),
        "keys": sorted({lock_key(tag) for tag in tags}),  # one order for every locker
        "start": after,
        "count": count,
    }


def locked_page(rows: Sequence[Sequence[Any]], after: int) -> LockedPage:
    """The rows of `READ_LOCKED` as events, and the head each row carries. A read that
    found none gives one row, of nulls but the head."""
    if not rows:
        return LockedPage([], after)
    found = rows if rows[0][0] is not None else []
    return LockedPage(sql.recorded_page(found), int(rows[0][9]))


def first_count(limit: int | None) -> int:
    """How many events the locked statement reads: a page, or fewer when `limit` says so."""
    return sql.PAGE if limit is None else min(limit, sql.PAGE)


def rest_limit(limit: int | None, read: int) -> int | None:
    return None if limit is None else limit - read
