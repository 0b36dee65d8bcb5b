"""`EventStore`: the one object callers hold, whatever the backend."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel

from .encoding import (
    MAX_AFTER,
    MAX_EVENT_BYTES,
    MAX_INT,
    PreparedBatch,
    check_expected_version,
    check_limit,
    check_max_event_bytes,
    check_name,
    check_position,
)
from .errors import EventStoreError, InvalidEvent, StoreUnavailable, UnsupportedStoreURL
from .events import (
    ANY,
    AppendResult,
    EncodedEvent,
    ExpectedVersion,
    NewEvent,
    RecordedEvent,
    StreamInfo,
    category_of,
)
from .log_status import LogStatus
from .port import Backend
from .snapshot import Snapshot, prepare_snapshot


class EventStore:
    """An append-only log of events in streams, with one global order.

    Open it with a URL::

        EventStore.open("sqlite:///events.db")          # a file, relative path
        EventStore.open("sqlite:////var/lib/app/events.db")
        EventStore.open("postgresql://user@host:5432/db?schema=orders")
        EventStore.open("memory://")

    Safe to share between threads; open one per process.
    """

    def __init__(
        self, backend: Backend, url: str, *, max_event_bytes: int = MAX_EVENT_BYTES
    ) -> None:
        self._backend = backend
        self.url = url
        self.max_event_bytes = check_max_event_bytes(max_event_bytes)
        """The most bytes of JSON an appended event's data and metadata may take together."""

    @classmethod
    def open(cls, url: str, *, max_event_bytes: int = MAX_EVENT_BYTES) -> EventStore:
        """The store at `url`; raises `StoreUnavailable` if its database cannot be opened.

        An event whose data and metadata take more than `max_event_bytes` of
        JSON together is refused (`InvalidEvent`); the default is 4 MiB.
        """
        check_max_event_bytes(max_event_bytes)
        return cls(_open_backend(url), url, max_event_bytes=max_event_bytes)

    def append(
        self,
        stream_id: str,
        events: Sequence[NewEvent],
        expected_version: ExpectedVersion = ANY,
    ) -> AppendResult:
        """Append `events` to `stream_id` atomically, if the stream is at `expected_version`.

        Raises `WrongExpectedVersion` (nothing written) when it is not. Sending
        the same batch again (same event ids) writes nothing and returns the
        first result, so a caller may retry until it gets an answer.
        """
        batch = PreparedBatch(stream_id, events, self.max_event_bytes)
        expected = check_expected_version(stream_id, expected_version)
        return self._backend.append(stream_id, category_of(stream_id), batch, expected)

    def read_stream(
        self,
        stream_id: str,
        from_version: int | None = None,
        backwards: bool = False,
        limit: int | None = None,
    ) -> Iterator[RecordedEvent]:
        """The events of one stream, from `from_version` (inclusive) on, or back from it."""
        check_name("stream id", stream_id)
        if from_version is not None:
            check_position("from_version", from_version)
        return self._backend.read_stream(
            stream_id, from_version=from_version, backwards=backwards, limit=check_limit(limit)
        )

    def read_stream_encoded(
        self, stream_id: str, from_version: int | None = None
    ) -> Iterator[EncodedEvent]:
        """The events of one stream from `from_version` (inclusive) on, as stored.

        Only their versions, types, data left as JSON text and the metadata's
        `EVENT_VERSION`: for a reader that decodes the JSON into its own types
        at once, such as `model_validate_json`, this costs half of `read_stream`.
        """
        check_name("stream id", stream_id)
        if from_version is not None:
            check_position("from_version", from_version)
        return self._backend.read_stream_encoded(stream_id, from_version=from_version or 1)

    def read_all(
        self,
        after: int = 0,
        limit: int | None = None,
        *,
        categories: Sequence[str] | str | None = None,
        types: Sequence[str] | str | None = None,
    ) -> Iterator[RecordedEvent]:
        """Events of every stream with position > `after`, in position order.

        Stops at the high-water mark: a reader that tails this, passing the
        last position it saw, sees every committed event once, in order.
        `categories` and `types` narrow it to some streams or event types.
        """
        return self._backend.read_all(
            after=check_position("after", after, MAX_AFTER),
            limit=check_limit(limit),
            categories=_names("category", categories),
            types=_names("event type", types),
        )

    def high_water_mark(self) -> int:
        """The position up to which the log is complete: no event can appear below it."""
        return self._backend.high_water_mark()

    def read_event(self, event_id: uuid.UUID) -> RecordedEvent | None:
        """The event stored with `event_id`, or None if no event has that id."""
        if not isinstance(event_id, uuid.UUID):
            raise InvalidEvent(f"an event id is a UUID, not {event_id!r}")
        return self._backend.read_event(event_id)

    def log_status(self) -> LogStatus:
        """The log's head, its high-water mark, and the append in flight that holds readers
        between the two, if any (PostgreSQL only: elsewhere they are always equal)."""
        return self._backend.log_status()

    def wait_for_events(self, after: int, timeout: float) -> bool:
        """Block until an event beyond position `after` can be read; False on `timeout`.

        PostgreSQL wakes on NOTIFY from the appending transaction; SQLite
        polls with a short back-off. Either way a True answer means
        `read_all(after=after)` has something to return.
        """
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
        return self._backend.wait_for_events(after, float(timeout))

    def stream_version(self, stream_id: str) -> int:
        """The stream's current version (its event count); 0 if it has none."""
        return self._backend.stream_version(check_name("stream id", stream_id))

    def list_streams(
        self, category: str | None = None, after: str | None = None, limit: int | None = None
    ) -> Iterator[StreamInfo]:
        """Streams ordered by id, optionally of one category, after a given id."""
        if category is not None:
            check_name("category", category)
        if after is not None:
            check_name("after", after)
        return self._backend.list_streams(category=category, after=after, limit=check_limit(limit))

    def save_snapshot(
        self,
        stream_id: str,
        *,
        version: int,
        type: str,
        data: dict[str, Any] | BaseModel,
        schema_version: int = 1,
    ) -> None:
        """Keep `data` as the state of `stream_id` at `version`, outside the log.

        Only the newest snapshot of a stream is kept: an older one than that
        stored is ignored. A version the stream has not reached is refused
        (`InvalidEvent`).
        """
        # Checked here only for range; prepare_snapshot checks the rest.
        for name, value, most in (
            ("version", version, MAX_INT),
            ("schema_version", schema_version, _MAX_INT32),
        ):
            if isinstance(value, int) and value > most:
                raise InvalidEvent(
                    f"snapshot of stream {stream_id!r}: {name} must be at most {most}, not {value}"
                )
        prepared = prepare_snapshot(stream_id, version, type, schema_version, data)
        self._backend.save_snapshot(prepared)

    def load_snapshot(self, stream_id: str) -> Snapshot | None:
        """The newest snapshot of `stream_id`, or None."""
        return self._backend.load_snapshot(check_name("stream id", stream_id))

    def close(self) -> None:
        self._backend.close()

    def __enter__(self) -> EventStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"EventStore.open({_redacted(self.url)!r})"


_MAX_INT32 = 2**31 - 1  # a snapshot's schema_version is a 32-bit column


def _names(what: str, names: Sequence[str] | str | None) -> tuple[str, ...] | None:
    if names is None:
        return None
    if isinstance(names, str):
        names = (names,)
    if not names:
        raise InvalidEvent(f"an empty list of {what} names matches nothing; pass None for all")
    return tuple(check_name(what, name) for name in names)


def _redacted(url: str) -> str:
    try:
        password = urlsplit(url).password
    except ValueError:  # unparsable: where a password would be is unknown
        return url.split("://", 1)[0] + "://..."
    if password is None:
        return url
    return url.replace(f":{password}@", ":***@", 1)


def _without_password(url: str, text: str) -> str:
    """`text`, a driver's message, with the password of `url` masked should it quote it."""
    try:
        password = urlsplit(url).password
    except ValueError:
        return text
    return text.replace(password, "***") if password else text


def _open_backend(url: str) -> Backend:
    """The backend for `url`, its driver's and the OS's errors raised as `StoreUnavailable`."""
    try:
        return _backend_for(url)
    except (InvalidEvent, UnsupportedStoreURL):
        raise
    except (EventStoreError, OSError) as error:
        # A backend's own StoreUnavailable names the database, not the URL the
        # caller gave; the driver's error stays the cause either way.
        cause = error.__cause__ if isinstance(error, EventStoreError) and error.__cause__ else error
        detail = _without_password(url, str(error))
        raise StoreUnavailable(
            f"cannot open the event store at {_redacted(url)!r}: {detail}"
        ) from cause


def _backend_for(url: str) -> Backend:
    if not isinstance(url, str):
        raise UnsupportedStoreURL(f"a store URL must be a str, not {type(url).__name__}")
    if "\x00" in url:
        raise UnsupportedStoreURL(
            f"a store URL must not contain a NUL character: {_redacted(url)!r}"
        )
    scheme = url.split(":", 1)[0].lower() if "://" in url else ""
    if scheme == "memory":
        from .memory import MemoryBackend

        return MemoryBackend()
    if scheme == "sqlite":
        from .sqlite import SQLiteBackend

        return SQLiteBackend.from_url(url)
    if scheme in ("postgresql", "postgres", "postgresql+psycopg"):
        from .postgres import PostgresBackend

        return PostgresBackend.from_url(url)
    raise UnsupportedStoreURL(
        f"no backend for {_redacted(url)!r}: use sqlite:///PATH, postgresql://... or memory://"
    )
