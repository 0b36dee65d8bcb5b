"""The event store's exceptions.

::

    EventStoreError
    ├── WrongExpectedVersion        the stream is not at the version the caller expected
    ├── AppendConditionFailed       an event matching the append's condition came after it
    ├── DuplicateEventId (ValueError)   an event id already stored, reused in another way
    ├── InvalidEvent (ValueError)       a name, payload or argument the store refuses
    │   ├── BadImportLine               a line of an import's file the store cannot take
    │   └── InvalidTenant               a tenant id, or a use of tenants, the store refuses
    ├── UnsupportedStoreURL (ValueError)
    ├── UnreadablePersonalData          sealed personal fields that neither open nor are forgotten
    ├── StreamTombstoned            the stream was deleted for ever: no append is taken
    ├── StreamFull                  the append would take a stream past the most versions it holds
    ├── RetentionBusy               another retention run holds the store's lock
    ├── ArchiveUnreadable           a read below the low-water mark cannot read the archive
    ├── ImportStopped               an import stopped by what only the store can find
    ├── StorePermissionDenied (PermissionError)  the store's role lacks a privilege the call needs
    └── StoreUnavailable (ConnectionError)  the database could not be reached
        ├── PoolExhausted                   no pooled connection came free in time
        │   └── TenantStoresBusy            every tenant store that may be open stayed in use
        └── AppendOutcomeUnknown            the connection broke after an append was sent

Driver errors (sqlite3's, psycopg's) are translated into these at the backend
boundary; they never reach a caller.
"""

from __future__ import annotations


class EventStoreError(Exception):
    """Base of every error the event store raises.

    Example::

        from eventcraft.eventstore import NO_STREAM, EventStore, EventStoreError, NewEvent

        with EventStore.open("sqlite:///shop.db") as store:
            store.append("order-1", [NewEvent("Placed", {})], expected_version=NO_STREAM)
            try:
                store.append("order-1", [NewEvent("Placed", {})], expected_version=NO_STREAM)
            except EventStoreError as error:  # any of the store's errors, never a driver's
                problem = f"order-1 was not placed: {error}"
            assert problem.startswith("order-1 was not placed: Wrong expected version")
    """


class WrongExpectedVersion(EventStoreError):
    """The stream's current version is not the one the append expected.

    Nothing of the append was written.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent, WrongExpectedVersion

        with EventStore.open("sqlite:///shop.db") as store:
            store.append("order-1", [NewEvent("Placed", {"cents": 500})])
            seen = store.stream_version("order-1")  # what a decision read: version 1
            store.append("order-1", [NewEvent("Cancelled", {})])  # another writer, in between
            try:
                store.append("order-1", [NewEvent("Paid", {})], expected_version=seen)
            except WrongExpectedVersion as error:  # read again, decide again
                assert (error.expected, error.actual) == (1, 2)
            assert [e.type for e in store.read_stream("order-1")] == ["Placed", "Cancelled"]
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

    Example::

        from eventcraft.eventstore import (
            AppendCondition,
            AppendConditionFailed,
            EventStore,
            NewEvent,
            Query,
            QueryItem,
        )

        booked = Query([QueryItem(types=["SeatBooked"], tags=["course:c1"])])
        with EventStore.open("sqlite:///shop.db") as store:
            seen = store.read_query(booked)  # two writers decide on this same read
            condition = AppendCondition(booked, after=seen.head)
            seat = NewEvent("SeatBooked", {"student": "s7"}, tags=["course:c1"])
            store.append("booking-1", [seat], condition=condition)
            try:
                seat = NewEvent("SeatBooked", {"student": "s8"}, tags=["course:c1"])
                store.append("booking-2", [seat], condition=condition)
            except AppendConditionFailed as error:
                assert (error.after, error.position) == (0, 1)  # booking-1's seat came after
            assert store.stream_version("booking-2") == 0
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

    Example::

        from eventcraft.eventstore import DuplicateEventId, EventStore, NewEvent

        placed = NewEvent("Placed", {"cents": 500})
        with EventStore.open("sqlite:///shop.db") as store:
            first = store.append("order-1", [placed])
            assert store.append("order-1", [placed]) == first  # a retry: the first result
            try:
                store.append("order-2", [placed])  # the same id, in another stream
            except DuplicateEventId as error:
                assert error.event_id == placed.id and error.stream_id == "order-2"
            assert store.stream_version("order-2") == 0
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
    """A stream id, event type, payload or argument the store refuses.

    Example::

        from eventcraft.eventstore import EventStore, InvalidEvent, NewEvent

        with EventStore.open("sqlite:///shop.db") as store:
            try:  # JSON has no NaN: refused, rather than stored as null
                store.append("sensor-1", [NewEvent("Measured", {"celsius": float("nan")})])
            except InvalidEvent as error:
                assert isinstance(error, ValueError)
                assert "['celsius']" in str(error)
            assert store.stream_version("sensor-1") == 0
    """


class UnsupportedStoreURL(EventStoreError, ValueError):
    """`EventStore.open` was given a URL no backend serves.

    Example::

        from eventcraft.eventstore import EventStore, UnsupportedStoreURL

        try:
            EventStore.open("sqlite://shop.db")  # two slashes: shop.db would be a host name
        except UnsupportedStoreURL as error:
            advice = str(error)
        assert "sqlite:///relative/path.db" in advice
        with EventStore.open("sqlite:///shop.db") as store:
            assert store.high_water_mark() == 0
    """


class UnreadablePersonalData(EventStoreError):
    """An event or snapshot holds sealed personal fields that neither open nor are forgotten.

    A forgotten subject's fields read as their replacement, never this: it
    means the store was opened with another key store than the one its events
    were sealed with, or the sealed text was altered.

    Example::

        from typing import Annotated

        from eventcraft.eventstore import EventStore, NewEvent, Personal, UnreadablePersonalData
        from pydantic import BaseModel


        class Registered(BaseModel):
            customer_id: str
            email: Annotated[str, Personal(subject="customer_id")]


        ann = Registered(customer_id="c7", email="ann@example.com")
        with EventStore.open("sqlite:///shop.db") as store:  # keys in shop.db's own table
            store.append("customer-7", [NewEvent("Registered", ann)])
        with EventStore.open("sqlite:///shop.db", keys="sqlite:///other-keys.db") as wrong:
            try:
                list(wrong.read_stream("customer-7"))
            except UnreadablePersonalData as error:
                reason = error.reason
        assert reason == "this store's key store never held"
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

    The example is the handling: its role may write, so its append is taken.

    Example::

        # needs: postgres
        from eventcraft.eventstore import EventStore, NewEvent, StorePermissionDenied

        with EventStore.open("postgresql://postgres@localhost:5432/eventcraft") as store:
            try:
                store.append("report-1", [NewEvent("Generated", {})])
            except StorePermissionDenied as error:  # no retry helps: grant, or use another role
                raise SystemExit(f"{error.role} needs {error.lacking}: {error.detail}") from error
            assert store.stream_version("report-1") == 1  # this role may write: taken
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
    """The database could not be reached, or the connection broke mid-call.

    Example::

        from eventcraft.eventstore import EventStore, StoreUnavailable

        try:  # nothing listens on port 1
            EventStore.open("postgresql://app@localhost:1/shop")
        except StoreUnavailable as error:  # an outage: try again later
            outage = error
        assert isinstance(outage, ConnectionError)
        assert "cannot connect to PostgreSQL" in str(outage)
    """


STORE_CLOSED = "the event store is closed"
"""What a closed store's `StoreUnavailable` says, on every backend."""


class PoolExhausted(StoreUnavailable):
    """Every connection of the store's pool stayed busy for as long as a caller may wait.

    Nothing was sent. A larger pool (`?pool_size=` in a PostgreSQL store's
    URL) or a longer wait (`?pool_timeout=`) helps if the database allows
    that many connections; so do fewer concurrent callers.

    Only a PostgreSQL store pools connections. The example is the handling: a
    connection is free, so its append is taken.

    Example::

        # needs: postgres
        from eventcraft.eventstore import EventStore, NewEvent, PoolExhausted


        def place(store: EventStore, order_id: str) -> tuple[int, str]:
            # An HTTP handler's answer: busy is a 503 to retry, not a failed order.
            try:
                store.append(order_id, [NewEvent("Placed", {})])
            except PoolExhausted as error:
                return 503, f"all {error.size} connections busy: retry"
            return 201, "placed"


        with EventStore.open("postgresql://postgres@localhost:5432/eventcraft") as store:
            assert place(store, "order-1") == (201, "placed")  # a connection came free
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

    Only PostgreSQL raises it (a SQLite or memory store's append never leaves the
    process). The example is the handling, which runs on any store: its append is
    taken, and the retry after it shows what the retry in the handler would do.

    Example::

        from eventcraft.eventstore import AppendOutcomeUnknown, EventStore, NewEvent

        events = [NewEvent("Placed", {"cents": 500})]  # their ids make the retry safe
        with EventStore.open("sqlite:///shop.db") as store:
            try:
                result = store.append("order-1", events)
            except AppendOutcomeUnknown:  # written or not: send the same events again
                result = store.append("order-1", events)
            assert store.append("order-1", events) == result  # a retry writes nothing
            assert store.stream_version("order-1") == 1
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
    """Another retention run holds the store's retention lock: this one did nothing.

    Example::

        from eventcraft.eventstore import EventStore, RetentionBusy

        with EventStore.open("sqlite:///shop.db") as store, store.retention.exclusive():
            other = EventStore.open("sqlite:///shop.db")  # as another process's run would
            try:
                with other.retention.exclusive():
                    raise AssertionError("two runs at once")
            except RetentionBusy as error:
                assert "another retention run holds" in str(error)
            other.close()
    """


class StreamTombstoned(EventStoreError):
    """The stream was deleted with a tombstone: it can never be written again.

    Nothing of the append (or of the `append_many` it was part of) was written.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent, StreamTombstoned

        with EventStore.open("sqlite:///shop.db") as store:
            store.append("cart-7", [NewEvent("ItemAdded", {"sku": "A1"})])
            store.delete_stream("cart-7", tombstone=True)
            try:
                store.append("cart-7", [NewEvent("ItemAdded", {"sku": "B2"})])
            except StreamTombstoned as error:
                refused = error.stream_id
            assert refused == "cart-7"
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

    The example is the handling; on SQLite its append is taken.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent, StreamFull


        def record(store: EventStore, entry: NewEvent) -> str:
            # Append to the ledger; once it is full, go on in the next one.
            try:
                store.append("ledger-2026", [entry])
                return "ledger-2026"
            except StreamFull as error:  # PostgreSQL only, at MAX_STREAM_VERSION events
                store.append("ledger-2026.2", [entry])
                return f"ledger-2026.2 ({error.stream_id} holds {error.most:,})"


        with EventStore.open("sqlite:///shop.db") as store:
            assert record(store, NewEvent("Entered", {"cents": 500})) == "ledger-2026"
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
    by the check before anything is written, it says nothing was imported.

    Example::

        import io

        from eventcraft.eventstore import BadImportLine, EventStore, import_log

        source = io.BytesIO(b'{"stream_id": "order-1", "type": "Placed"}')
        with EventStore.open("sqlite:///copy.db") as copy:
            try:
                import_log(copy, source)
            except BadImportLine as error:  # found by the check: nothing written
                assert str(error).startswith("line 1: missing position, id")
            assert copy.high_water_mark() == 0
    """


class ImportStopped(EventStoreError):
    """An import stopped by what only the store can find (an id it holds in another
    stream, another event at a version, a stream it tombstoned or deleted otherwise than
    the file), or by the temporary copy of a source that cannot be read twice (then
    nothing was imported). The lines before the one it names were imported; the import
    run again resumes after them.

    Example::

        from eventcraft.eventstore import (
            EventStore,
            ImportStopped,
            NewEvent,
            export_log,
            import_log,
        )

        placed = NewEvent("Placed", {"cents": 500})
        with EventStore.open("sqlite:///shop.db") as shop, open("shop.ndjson", "wb") as out:
            shop.append("order-1", [placed])
            export_log(shop, out)
        with EventStore.open("sqlite:///copy.db") as copy, open("shop.ndjson", "rb") as source:
            copy.append("order-9", [placed])  # the same event id, in another stream
            try:
                import_log(copy, source)  # the file's check passes: only the store knows
            except ImportStopped as error:
                assert "already in the store, in stream 'order-9'" in str(error)
            assert copy.stream_version("order-1") == 0
    """


class InvalidTenant(InvalidEvent):
    """A tenant id the store refuses (`check_tenant` says which are taken), or a use of
    tenants that cannot be: a store with no tenants asked for one, a tenant's place that
    would not be its own.

    Example::

        from eventcraft.eventstore import InvalidTenant, Tenants

        with Tenants("sqlite:///tenant-{tenant}.db") as tenants:
            try:  # from a request: never trusted to name a file
                tenants.for_tenant("../billing")
            except InvalidTenant as error:
                assert "path separator" in str(error)
    """


class TenantStoresBusy(PoolExhausted):
    """A call for a tenant whose store is closed waited as long as `Tenants` lets it for
    one of the `most_open` open tenant stores to be idle, and none was: nothing was done.

    Raise `most_open` if the database takes that many connections, or make fewer tenants'
    calls at once. Like `PoolExhausted`, an answer to retry later.

    Example::

        from eventcraft.eventstore import NewEvent, Tenants, TenantStoresBusy

        with Tenants("sqlite:///tenant-{tenant}.db", most_open=1, wait=0.1) as tenants:
            acme, globex = tenants.for_tenant("acme"), tenants.for_tenant("globex")
            acme.append("order-1", [NewEvent("Placed", {}), NewEvent("Paid", {})])
            reading = acme.read_stream("order-1")
            next(reading)  # acme's store is in use until this read ends
            try:
                globex.append("order-1", [NewEvent("Placed", {})])
            except TenantStoresBusy as error:
                assert (error.size, error.timeout) == (1, 0.1)
            assert [e.type for e in reading] == ["Paid"]  # the read ends: acme's store is idle
            globex.append("order-1", [NewEvent("Placed", {})])  # globex's store replaces it
    """

    def __init__(self, size: int, timeout: float) -> None:
        super().__init__(size, timeout)
        self.args = (
            f"all {size} tenant stores that may be open at once stayed in use for "
            f"{timeout:g} s; nothing was done (raise most_open, or make fewer tenants' "
            "calls at once)",
        )


class ArchiveUnreadable(EventStoreError):
    """A read of a store opened with `archive=` reached below the low-water mark, and the
    archive that holds those events cannot be read here: pyarrow is not installed (the
    `eventcraft[retention]` extra), its folder is missing, or it ends below the mark. Raised
    before any event of the read below the mark is handed over: never a silent hole.

    Example::

        import shutil
        import subprocess
        import sys

        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.eventstore import ArchiveUnreadable

        with EventStore.open("sqlite:///shop.db") as store:
            store.append("cart-7", [NewEvent("ItemAdded", {"n": n}) for n in range(3)])
        eventcraft = [sys.executable, "-m", "eventcraft", "--store", "sqlite:///shop.db"]
        run = ["retention", "apply", "--archive", "archive", "--keep", "cart:count=1", "--yes"]
        subprocess.run([*eventcraft, *run], check=True, capture_output=True)
        shutil.move("archive", "elsewhere")  # the folder the run recorded is gone
        with EventStore.open("sqlite:///shop.db", archive=True) as store:
            try:
                list(store.read_all())
            except ArchiveUnreadable as error:
                assert "the archive folder" in str(error) and "is missing" in str(error)
        with EventStore.open("sqlite:///shop.db", archive="elsewhere") as store:
            assert [event.data["n"] for event in store.read_all()] == [0, 1, 2]
    """
