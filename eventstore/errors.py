"""The event store's exceptions.

::

    EventStoreError
    ├── WrongExpectedVersion        the stream is not at the version the caller expected
    ├── AppendConditionFailed       an event matching the append's condition came after it
    ├── DuplicateEventId (ValueError)   an event id already stored, reused in another way
    ├── InvalidEvent (ValueError)       a name, payload or argument the store refuses
    │   └── BadImportLine               a line of an import's file the store cannot take
    ├── UnsupportedStoreURL (ValueError)
    ├── UnreadablePersonalData          sealed personal fields that neither open nor are forgotten
    ├── StreamTombstoned            the stream was deleted for ever: no append is taken
    ├── StreamFull                  the append would take a stream past the most versions it holds
    ├── RetentionBusy               another retention run holds the store's lock
    ├── ImportStopped               an import stopped by what only the store can find
    ├── StorePermissionDenied (PermissionError)  the store's role lacks a privilege the call needs
    └── StoreUnavailable (ConnectionError)  the database could not be reached
        ├── PoolExhausted                   no pooled connection came free in time
        └── AppendOutcomeUnknown            the connection broke after an append was sent

Driver errors (sqlite3's, psycopg's) are translated into these at the backend
boundary; they never reach a caller.
"""

from __future__ import annotations


class EventStoreError(Exception):
    """Base of every error the event store raises."""


class WrongExpectedVersion(EventStoreError):
    """The stream's current version is not the one the append expected.

    Nothing of the append was written.
    """

    def __init__(self, stream_id: str, expected: object, actual: int) -> None:
        self.stream_id = stream_id
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"Wrong expected version: {expected!r} "
            f"(stream: {stream_id!r}, stream version: {actual})"
        )

    def __reduce__(self) -> tuple[type[WrongExpectedVersion], tuple[str, object, int]]:
        # Keeps the error intact across process boundaries (multiprocessing).
        return (type(self), (self.stream_id, self.expected, self.actual))


class AppendConditionFailed(EventStoreError):
    """An event matching the append's condition was stored after the position it names.

    Nothing of the append was written: read again, decide again.
    """

    def __init__(self, stream_id: str, query: object, after: int | None, position: int) -> None:
        self.stream_id = stream_id
        self.query = query
        """The condition's `Query`."""
        self.after = after
        """The condition's `after`: where the decision had read up to."""
        self.position = position
        """The first position after `after` holding an event that matches `query`."""
        super().__init__(
            f"Append condition failed: the event at position {position} matches {query!r}, "
            f"stored after position {after} (stream: {stream_id!r}); nothing was written"
        )

    def __reduce__(
        self,
    ) -> tuple[type[AppendConditionFailed], tuple[str, object, int | None, int]]:
        return (type(self), (self.stream_id, self.query, self.after, self.position))


class DuplicateEventId(EventStoreError, ValueError):
    """An append reuses a stored event id other than as an exact retry.

    A retry is the same ids, in the same order, in the same stream; anything
    else that reuses an id is refused and writes nothing.
    """

    def __init__(self, stream_id: str, event_id: object, detail: str) -> None:
        self.stream_id = stream_id
        self.event_id = event_id
        self.detail = detail
        super().__init__(
            f"Event id {event_id} is already stored ({detail}); "
            f"the append to stream {stream_id!r} wrote nothing"
        )

    def __reduce__(self) -> tuple[type[DuplicateEventId], tuple[str, object, str]]:
        return (type(self), (self.stream_id, self.event_id, self.detail))


class InvalidEvent(EventStoreError, ValueError):
    """A stream id, event type, payload or argument the store refuses."""


class UnsupportedStoreURL(EventStoreError, ValueError):
    """`EventStore.open` was given a URL no backend serves."""


class UnreadablePersonalData(EventStoreError):
    """An event or snapshot holds sealed personal fields that neither open nor are forgotten.

    A forgotten subject's fields read as their replacement, never this: it
    means the store was opened with another key store than the one its events
    were sealed with, or the sealed text was altered.
    """

    def __init__(self, where: str, key_id: str, reason: str) -> None:
        self.where = where
        self.key_id = key_id
        self.reason = reason
        super().__init__(f"{where} holds personal data sealed with key {key_id} that {reason}")

    def __reduce__(self) -> tuple[type[UnreadablePersonalData], tuple[str, str, str]]:
        return (type(self), (self.where, self.key_id, self.reason))


class StorePermissionDenied(EventStoreError, PermissionError):
    """The database refused the store's role a privilege the call needs.

    Not an outage: the database was reached, and the same call fails the same way until
    the role is granted the privilege (or the call made with a role that has it). A
    read-only role (USAGE on the schema, SELECT on its tables) opens a store and reads
    it; its appends end here, naming what they lack.
    """

    def __init__(self, role: str, lacking: str, detail: str) -> None:
        self.role = role
        """The role the database refused."""
        self.lacking = lacking
        """What it lacks: a privilege on an object ("INSERT on table app.eventcraft_events"),
        or the database's own words when no single privilege is known."""
        self.detail = detail
        """What needed it, and what to do."""
        super().__init__(f"permission denied: the role {role!r} lacks {lacking} ({detail})")

    def __reduce__(self) -> tuple[type[StorePermissionDenied], tuple[str, str, str]]:
        return (type(self), (self.role, self.lacking, self.detail))


class StoreUnavailable(EventStoreError, ConnectionError):
    """The database could not be reached, or the connection broke mid-call."""


STORE_CLOSED = "the event store is closed"
"""What a closed store's `StoreUnavailable` says, on every backend."""


class PoolExhausted(StoreUnavailable):
    """Every connection of the store's pool stayed busy for as long as a caller may wait.

    Nothing was sent. A larger pool (`?pool_size=` in a PostgreSQL store's
    URL) or a longer wait (`?pool_timeout=`) helps if the database allows
    that many connections; so do fewer concurrent callers.
    """

    def __init__(self, size: int, timeout: float) -> None:
        self.size = size
        self.timeout = timeout
        super().__init__(
            f"all {size} connections of the event store's pool stayed busy for {timeout:g} s; "
            "nothing was sent (raise pool_size or pool_timeout in the store URL, "
            "or make fewer calls at once)"
        )

    def __reduce__(self) -> tuple[type[PoolExhausted], tuple[int, float]]:
        return (type(self), (self.size, self.timeout))


class AppendOutcomeUnknown(StoreUnavailable):
    """An append was sent, then the connection broke before its answer came back.

    It may or may not have been written. Retrying the same events (the same
    event ids) is safe: if the first append was stored, the retry writes
    nothing and returns its result. The error that broke the connection is
    the `__cause__`.
    """

    def __init__(self, stream_id: str, detail: str) -> None:
        self.stream_id = stream_id
        self.detail = detail
        super().__init__(
            f"the append to stream {stream_id!r} may or may not have been written: {detail}; "
            "retrying the same events is safe"
        )

    def __reduce__(self) -> tuple[type[AppendOutcomeUnknown], tuple[str, str]]:
        return (type(self), (self.stream_id, self.detail))


class RetentionBusy(EventStoreError):
    """Another retention run holds the store's retention lock: this one did nothing."""


class StreamTombstoned(EventStoreError):
    """The stream was deleted with a tombstone: it can never be written again.

    Nothing of the append (or of the `append_many` it was part of) was written.
    """

    def __init__(self, stream_id: str) -> None:
        self.stream_id = stream_id
        super().__init__(
            f"stream {stream_id!r} is tombstoned: it can never be written again; "
            "nothing was written"
        )

    def __reduce__(self) -> tuple[type[StreamTombstoned], tuple[str]]:
        return (type(self), (self.stream_id,))


class StreamFull(EventStoreError):
    """The append would take the stream past `most` events, the most one holds.

    On PostgreSQL versions are 4-byte integers (`MAX_STREAM_VERSION`, 2,147,483,647),
    which keeps the stream index's entries a quarter smaller; SQLite and memory
    stores have no such bound. Nothing of the append (or of the `append_many` it
    was part of) was written: start a new stream, as a closed period's books do.
    """

    def __init__(self, stream_id: str, most: int) -> None:
        self.stream_id = stream_id
        self.most = most
        super().__init__(
            f"stream {stream_id!r} is full: an append would take it past version {most:,}, "
            "the most a stream holds; nothing was written"
        )

    def __reduce__(self) -> tuple[type[StreamFull], tuple[str, int]]:
        return (type(self), (self.stream_id, self.most))


class BadImportLine(InvalidEvent):
    """A line of the file an import reads that the store cannot take: malformed, out of
    its stream's order, or an event the store refuses. Its message names the line; found
    by the check before anything is written, it says nothing was imported."""


class ImportStopped(EventStoreError):
    """An import stopped by what only the store can find (an id it holds in another
    stream, another event at a version, a stream it tombstoned or deleted otherwise than
    the file), or by the temporary copy of a source that cannot be read twice (then
    nothing was imported). The lines before the one it names were imported; the import
    run again resumes after them."""
