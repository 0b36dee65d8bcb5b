"""The store's calls checked once, for `EventStore` and `AsyncEventStore` alike.

Each function takes what a caller passed to one method of the store and
returns what the backend's method takes, or raises `InvalidEvent` naming
what was wrong. The two faces of the store call these and nothing else
before their backends, so a rule about bad input cannot hold on one and not
the other.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, NamedTuple
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from pydantic import BaseModel

from .encoding import (
    MAX_AFTER,
    MAX_INT,
    PreparedBatch,
    check_expected_version,
    check_limit,
    check_name,
    check_position,
)
from .errors import (
    EventStoreError,
    InvalidEvent,
    StorePermissionDenied,
    StoreUnavailable,
    UnsupportedStoreURL,
)
from .events import ExpectedVersion, NewEvent, StreamState, category_of
from .query import AppendCondition, Query, checked_query
from .snapshot import PreparedSnapshot, prepare_snapshot

_MAX_INT32 = 2**31 - 1  # a snapshot's schema_version is a 32-bit column


class AppendCall(NamedTuple):
    """An append's arguments as a backend takes them."""

    stream_id: str
    category: str
    batch: PreparedBatch
    expected: int | StreamState
    condition: AppendCondition | None = None


class ReadAllCall(NamedTuple):
    """A read of the log's arguments as a backend takes them."""

    after: int
    limit: int | None
    categories: tuple[str, ...] | None
    types: tuple[str, ...] | None


def append_call(
    stream_id: str,
    events: Sequence[NewEvent],
    expected_version: ExpectedVersion,
    max_event_bytes: int,
    condition: AppendCondition | None = None,
) -> AppendCall:
    batch = PreparedBatch(stream_id, events, max_event_bytes)
    expected = check_expected_version(stream_id, expected_version)
    if condition is not None and not isinstance(condition, AppendCondition):
        raise InvalidEvent(
            f"condition for stream {stream_id!r} must be an AppendCondition or None, "
            f"not {type(condition).__name__}: {condition!r:.80}"
        )
    return AppendCall(stream_id, category_of(stream_id), batch, expected, condition)


ManyAppend = (
    tuple[str, Sequence[NewEvent], ExpectedVersion]
    | tuple[str, Sequence[NewEvent], ExpectedVersion, AppendCondition | None]
)
"""An item of `append_many`: (stream_id, events, expected_version[, condition])."""


def append_many_call(appends: Sequence[ManyAppend], max_event_bytes: int) -> tuple[AppendCall, ...]:
    """The appends of one `append_many`, each checked as an append is; a stream named
    twice, or an event id given twice, is refused."""
    if isinstance(appends, str | bytes) or not isinstance(appends, Sequence):
        raise InvalidEvent(
            "append_many takes a list of (stream_id, events, expected_version) tuples, "
            f"not {type(appends).__name__}"
        )
    if not appends:
        raise InvalidEvent("append_many needs at least one (stream_id, events, expected_version)")
    calls: list[AppendCall] = []
    streams: set[str] = set()
    ids: set[uuid.UUID] = set()
    for index, append in enumerate(appends):
        if not isinstance(append, tuple | list) or len(append) not in (3, 4):
            raise InvalidEvent(
                f"append_many: item {index} must be a (stream_id, events, expected_version) "
                f"or (stream_id, events, expected_version, condition) tuple, not {append!r:.80}"
            )
        stream_id, events, expected_version, *condition = append
        call = append_call(stream_id, events, expected_version, max_event_bytes, *condition)
        if call.stream_id in streams:
            raise InvalidEvent(
                f"append_many: stream {call.stream_id!r} is named twice; "
                "give all of its events in one item"
            )
        streams.add(call.stream_id)
        for event_id in call.batch.ids:
            if event_id in ids:
                raise InvalidEvent(f"append_many: event id {event_id} is given twice")
            ids.add(event_id)
        calls.append(call)
    return tuple(calls)


def read_query_call(query: Query, after: int, limit: int | None) -> tuple[Query, int, int | None]:
    return (
        checked_query(query),
        check_position("after", after, MAX_AFTER),
        check_limit(limit),
    )


def stream_id_call(stream_id: str) -> str:
    return check_name("stream id", stream_id)


def delete_stream_call(
    stream_id: str, expected_version: ExpectedVersion, tombstone: bool, deleted_at: datetime | None
) -> tuple[str, int | StreamState, bool, datetime | None]:
    """The stream, expected version, tombstone flag and time (in UTC) of a deletion,
    checked."""
    check_name("stream id", stream_id)
    expected = check_expected_version(stream_id, expected_version)
    if not isinstance(tombstone, bool):
        raise InvalidEvent(f"tombstone must be True or False, not {tombstone!r}")
    if deleted_at is not None:
        if not isinstance(deleted_at, datetime) or deleted_at.utcoffset() is None:
            raise InvalidEvent(
                f"deleted_at must be None or a datetime with a time zone, not {deleted_at!r:.80}"
            )
        deleted_at = deleted_at.astimezone(UTC)
    return stream_id, expected, tombstone, deleted_at


def read_stream_call(
    stream_id: str, from_version: int | None, limit: int | None
) -> tuple[str, int | None, int | None]:
    """The stream id, `from_version` and `limit` of a read of one stream, checked."""
    check_name("stream id", stream_id)
    if from_version is not None:
        check_position("from_version", from_version)
    return stream_id, from_version, check_limit(limit)


def read_stream_encoded_call(stream_id: str, from_version: int | None) -> tuple[str, int]:
    check_name("stream id", stream_id)
    if from_version is not None:
        check_position("from_version", from_version)
    return stream_id, from_version or 1


def read_all_call(
    after: int,
    limit: int | None,
    categories: Sequence[str] | str | None,
    types: Sequence[str] | str | None,
) -> ReadAllCall:
    return ReadAllCall(
        check_position("after", after, MAX_AFTER),
        check_limit(limit),
        names("category", categories),
        names("event type", types),
    )


def until_call(until: int | None) -> int | None:
    """The inclusive last position of a read, None for the high-water mark."""
    return None if until is None else check_position("until", until, MAX_AFTER)


def placed_call(
    after: int, until: int | None, categories: Sequence[str] | str | None
) -> tuple[int, int, tuple[str, ...] | None]:
    """`after`, `until` and `categories` of `placed_deletions`, checked; no `until`, the
    largest position."""
    return (
        check_position("after", after, MAX_AFTER),
        MAX_INT if until is None else check_position("until", until, MAX_INT),
        names("category", categories),
    )


def event_id_call(event_id: uuid.UUID) -> uuid.UUID:
    if not isinstance(event_id, uuid.UUID):
        raise InvalidEvent(f"an event id is a UUID, not {event_id!r}")
    return event_id


def wait_call(after: int, timeout: float) -> tuple[int, float]:
    """`after` and `timeout` of a wait for events, checked; the timeout as a float."""
    check_position("after", after, MAX_AFTER)
    if (
        not isinstance(timeout, int | float)
        or isinstance(timeout, bool)
        or not 0 <= timeout <= threading.TIMEOUT_MAX  # NaN fails this too
    ):
        raise InvalidEvent(
            f"timeout must be a number of seconds from 0 to {threading.TIMEOUT_MAX}, "
            f"not {timeout!r}"
        )
    return after, float(timeout)


def list_streams_call(
    category: str | None, after: str | None, limit: int | None
) -> tuple[str | None, str | None, int | None]:
    if category is not None:
        check_name("category", category)
    if after is not None:
        check_name("after", after)
    return category, after, check_limit(limit)


def snapshot_call(
    stream_id: str,
    version: int,
    type: str,
    data: dict[str, Any] | BaseModel,
    schema_version: int,
) -> PreparedSnapshot:
    # Checked here only for range; prepare_snapshot checks the rest.
    for name, value, most in (
        ("version", version, MAX_INT),
        ("schema_version", schema_version, _MAX_INT32),
    ):
        if isinstance(value, int) and value > most:
            raise InvalidEvent(
                f"snapshot of stream {stream_id!r}: {name} must be at most {most}, not {value}"
            )
    return prepare_snapshot(stream_id, version, type, schema_version, data)


def names(what: str, given: Sequence[str] | str | None) -> tuple[str, ...] | None:
    if given is None:
        return None
    if isinstance(given, str):
        given = (given,)
    if not given:
        raise InvalidEvent(f"an empty list of {what} names matches nothing; pass None for all")
    return tuple(check_name(what, name) for name in given)


def url_options(url: str, backend: str, takes: Sequence[str]) -> dict[str, str]:
    """The options in `url`'s query; raises `UnsupportedStoreURL` for one the `backend`
    does not take, naming those it takes (a misspelt option would otherwise do nothing)."""
    options = dict(parse_qsl(url.partition("?")[2], keep_blank_values=True))
    unknown = sorted(set(options) - set(takes))
    if unknown:
        raise UnsupportedStoreURL(
            f"unknown option{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(repr(name) for name in unknown)} in a {backend} store URL: "
            f"it takes {', '.join(takes) if takes else 'none'}"
        )
    return options


@contextmanager
def opening(url: str) -> Iterator[None]:
    """Around the opening of a store's backend: its driver's and the OS's errors raised as
    `StoreUnavailable` naming `url` (its password masked); bad input as it was."""
    try:
        yield
    except (InvalidEvent, UnsupportedStoreURL, StorePermissionDenied):
        raise  # a refused privilege is no outage: it names what the role lacks
    except (EventStoreError, OSError) as error:
        raised = unavailable(url, error)
        raise raised from raised.__cause__


def unavailable(url: str, error: EventStoreError | OSError) -> StoreUnavailable:
    """The error to raise for a database at `url` that could not be opened."""
    # A backend's own StoreUnavailable names the database, not the URL the
    # caller gave; the driver's error stays the cause either way.
    cause = error.__cause__ if isinstance(error, EventStoreError) and error.__cause__ else error
    detail = without_password(url, str(error))
    raised = StoreUnavailable(f"cannot open the event store at {redacted(url)!r}: {detail}")
    raised.__cause__ = cause
    return raised


def redacted(url: str) -> str:
    """`url` with its password, if any, masked, and those of the URLs its `direct=` (a
    PostgreSQL store behind a pooler) and `replica=` (its read replica) name.

    Example::

        from eventcraft.eventstore import redacted

        url = "postgresql://app:s3cret@db.example:5432/shop"
        assert redacted(url) == "postgresql://app:***@db.example:5432/shop"
        assert redacted("sqlite:///shop.db") == "sqlite:///shop.db"
        pooled = "postgresql://app@pgbouncer:6432/shop?pooler=transaction&direct="
        assert redacted(pooled + "postgresql://app:pw@db/shop").endswith("app:***@db/shop")
    """
    try:
        parts = urlsplit(url)
        password = parts.password
        query = dict(parse_qsl(parts.query))
        named = [query[option] for option in ("direct", "replica") if query.get(option)]
        inners = [urlsplit(each).password for each in named]
    except ValueError:  # unparsable: where a password would be is unknown
        return url.split("://", 1)[0] + "://..."
    masked = url if password is None else url.replace(f":{password}@", ":***@", 1)
    for inner in inners:
        if inner:  # as written in the query, or percent-encoded there
            masked = masked.replace(f":{inner}@", ":***@")
            masked = masked.replace(quote(f":{inner}@", safe=""), quote(":***@", safe=""))
    return masked


def without_password(url: str, text: str) -> str:
    """`text`, a driver's message, with the password of `url` masked should it quote it.

    Example::

        from eventcraft.eventstore import without_password

        url = "postgresql://app:s3cret@db.example:5432/shop"
        message = 'connection failed: password "s3cret" refused for user "app"'
        assert without_password(url, message) == (
            'connection failed: password "***" refused for user "app"'
        )
    """
    try:
        password = urlsplit(url).password
    except ValueError:
        return text
    if not password:
        return text
    # The driver was given the password decoded (`%40` as `@`): either form may show.
    for form in sorted({password, unquote(password)}, key=len, reverse=True):
        text = text.replace(form, "***")
    return text
