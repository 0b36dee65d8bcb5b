# Generated from eventstore/async_store.py by scripts/async_to_sync.py: do not edit.
# Edit eventstore/async_store.py, then run `make generate`.
"""`EventStore`: the one object callers hold, whatever the backend."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from . import arguments, json_lines, telemetry, tenant_places
from .arguments import ManyAppend
from .backends import backend_for, retention_for, with_replicas
from .deletion import StreamDeletion, of_categories
from .encoding import MAX_EVENT_BYTES, check_max_event_bytes
from .errors import InvalidTenant
from .events import (
    ANY,
    AppendResult,
    EncodedEvent,
    EncodedRecord,
    ExpectedVersion,
    NewEvent,
    RecordedEvent,
    StreamInfo,
)
from .json_lines import JsonLines
from .log_status import LogStatus
from .personal.keys import KeyStore
from .personal.sealing import Shredder
from .port import Backend
from .query import AppendCondition, Query, QueryResult
from .retention import Retention
from .snapshot import Snapshot
from .tenant_places import TenantDrop, TenantPlace
from .type_counts import TypeCount

if TYPE_CHECKING:  # the tenants' module opens stores: imported for its type alone
    from .tenants import Tenants


class EventStore:
    """An append-only log of events in streams, with one global order.

    Open it with a URL. The URL names the backend:
    `sqlite:///events.db` (a file, relative path), `sqlite:////var/lib/app/events.db`,
    `postgresql://user@host:5432/db?schema=orders` or `memory://`.
    Safe to share between threads; open one per process.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent

        with EventStore.open("sqlite:///shop.db") as store:
            store.append("order-1", [NewEvent("OrderPlaced", {"cents": 1250})])
            store.append("order-1", [NewEvent("OrderPaid", {})], expected_version=1)
            events = [event for event in store.read_stream("order-1")]
        assert [(e.version, e.type) for e in events] == [(1, "OrderPlaced"), (2, "OrderPaid")]
    """

    def __init__(
        self,
        backend: Backend,
        url: str,
        *,
        max_event_bytes: int = MAX_EVENT_BYTES,
        keys: KeyStore | str | None = None,
        sealed: bool = False,
        place: TenantPlace | None = None,
        tenants: Tenants | None = None,
    ) -> None:
        self._backend = backend
        self._shredder = Shredder(url if keys is None else keys, sealed=sealed)
        self._retention: Retention | None = None
        self._place = place
        self._tenancy = tenants
        self.url = url
        self.max_event_bytes = check_max_event_bytes(max_event_bytes)
        """The most bytes of JSON an appended event's data and metadata may take together."""
        self.tenant = None if place is None else place.tenant
        """The tenant whose store this is (`?tenant=` in its URL, or `for_tenant`); None for
        a store of no tenant."""

    @classmethod
    def open(
        cls,
        url: str,
        *,
        max_event_bytes: int = MAX_EVENT_BYTES,
        group_commit: bool = True,
        keys: KeyStore | str | None = None,
        sealed: bool = False,
        create_folders: bool = False,
        tenants: Tenants | None = None,
        replicas: Sequence[str] = (),
    ) -> EventStore:
        """The store at `url`; raises `StoreUnavailable` if its database cannot be opened.

        An event whose data and metadata take more than `max_event_bytes` of
        JSON together is refused (`InvalidEvent`); the default is 4 MiB.

        With `group_commit` (the default), appends from threads waiting at the
        same moment share one transaction and one commit, each still all or
        nothing with its own version check; a lone caller's append goes at once.

        Fields marked `Personal` are sealed with keys of the key store `keys`:
        a `KeyStore`, or the URL of one; by default the table `eventcraft_keys`
        in the store's own database. With `sealed`, reads hand those fields over
        sealed, as stored: for copies of the log that must stay erasable.

        A SQLite store's file is made if it is missing, in a folder that is
        there: a missing folder raises `StoreUnavailable` naming it, unless
        `create_folders` asks for it to be made.

        One tenant's store: `?tenant=acme` in a URL that names each tenant's place with
        `{tenant}` (`sqlite:///tenants/{tenant}.db?tenant=acme`) opens the store of that
        tenant alone, its database or folder made if missing (`Tenants` says where a
        tenant may be). With `tenants`, the store hands out its tenants' stores
        (`for_tenant`), and closes them when it closes.

        With `replicas` (PostgreSQL: the URL of one hot standby of the store's server,
        the same as `?replica=` in `url`), the store reads from the standby and writes
        to the primary; a caller reads its own writes (docs: how-to, read replicas).
        """
        check_max_event_bytes(max_event_bytes)
        if replicas:
            url = with_replicas(url, replicas)
        place = tenant_places.tenant_place(url)
        if place is not None:
            if tenants is not None:
                raise InvalidTenant("a tenant's store has no tenants: give tenants= to another")
            tenant_places.prepare(place)
            url = place.url
        with arguments.opening(url):
            backend = backend_for(url, group_commit=group_commit, create_folders=create_folders)
        return cls(
            backend,
            url,
            max_event_bytes=max_event_bytes,
            keys=keys,
            sealed=sealed,
            place=place,
            tenants=tenants,
        )

    def append(
        self,
        stream_id: str,
        events: Sequence[NewEvent],
        expected_version: ExpectedVersion = ANY,
        *,
        condition: AppendCondition | None = None,
    ) -> AppendResult:
        """Append `events` to `stream_id` atomically, if the stream is at `expected_version`.

        Raises `WrongExpectedVersion` (nothing written) when it is not. Sending
        the same batch again (same event ids) writes nothing and returns the
        first result, so a caller may retry until it gets an answer.

        With a `condition`, raises `AppendConditionFailed` (nothing written) when
        an event matching its query was stored after its position: the check of
        a decision made on `read_query`'s result. Only writers of matching events
        wait for each other.
        """
        traced = telemetry.appending(stream_id, events, expected_version, self.tenant)
        if traced is None:
            call = arguments.append_call(
                stream_id, events, expected_version, self.max_event_bytes, condition
            )
            self._shredder.seal_batch(call.batch)
            return self._backend.append(*call)
        with traced:
            call = arguments.append_call(
                stream_id, traced.events, expected_version, self.max_event_bytes, condition
            )
            self._shredder.seal_batch(call.batch)
            return traced.done(self._backend.append(*call))

    def append_many(self, appends: Sequence[ManyAppend]) -> list[AppendResult]:
        """Append to several streams atomically: every append or none.

        `appends` are `(stream_id, events, expected_version)` tuples, or
        `(stream_id, events, expected_version, condition)`, each stream at most
        once. Each append checks its own version and condition, against the store
        as it was before the call; when one is refused, `WrongExpectedVersion`
        (or `AppendConditionFailed`) names its stream and nothing is written.
        Sending the same call again (same event ids) writes nothing and
        returns the first results. Returns each append's result, in order.
        """
        calls = arguments.append_many_call(appends, self.max_event_bytes)
        for call in calls:
            self._shredder.seal_batch(call.batch)
        return self._backend.append_many(calls)

    def read_stream(
        self,
        stream_id: str,
        from_version: int | None = None,
        backwards: bool = False,
        limit: int | None = None,
    ) -> Iterator[RecordedEvent]:
        """The events of one stream, from `from_version` (inclusive) on, or back from it.

        The arguments are checked at the call, before anything is read."""
        stream_id, from_version, limit = arguments.read_stream_call(stream_id, from_version, limit)
        telemetry.count_read("stream", self.tenant)
        return self._shredder.opened(
            self._backend.read_stream(
                stream_id, from_version=from_version, backwards=backwards, limit=limit
            )
        )

    def read_stream_encoded(
        self, stream_id: str, from_version: int | None = None
    ) -> Iterator[EncodedEvent]:
        """The events of one stream from `from_version` (inclusive) on, as stored.

        Only their versions, types, data left as JSON text and the metadata's
        `EVENT_VERSION`: for a reader that decodes the JSON into its own types
        at once, such as `model_validate_json`, this costs half of `read_stream`.
        """
        stream_id, start = arguments.read_stream_encoded_call(stream_id, from_version)
        telemetry.count_read("stream_encoded", self.tenant)
        return self._shredder.opened_encoded(
            stream_id, self._backend.read_stream_encoded(stream_id, from_version=start)
        )

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
        call = arguments.read_all_call(after, limit, categories, types)
        telemetry.count_read("all", self.tenant)
        return self._shredder.opened(
            self._backend.read_all(
                after=call.after, limit=call.limit, categories=call.categories, types=call.types
            )
        )

    def count_events(
        self,
        after: int = 0,
        until: int | None = None,
        *,
        categories: Sequence[str] | str | None = None,
        types: Sequence[str] | str | None = None,
        limit: int | None = None,
    ) -> int:
        """How many events `read_all(after, categories=, types=)` brings up to `until`
        (inclusive; None for the high-water mark), counting at most `limit`.

        Counted in the store's indexes, nothing read: the cost grows with the events
        counted, which `limit` bounds (a count that reaches it says "at least").
        """
        call = arguments.read_all_call(after, limit, categories, types)
        last = arguments.until_call(until)
        return self._backend.count_events(
            after=call.after,
            until=last,
            categories=call.categories,
            types=call.types,
            limit=call.limit,
        )

    def count_types(
        self,
        after: int = 0,
        until: int | None = None,
        *,
        types: Sequence[str] | str | None = None,
    ) -> list[TypeCount]:
        """How many events of each type and stored schema version (`EVENT_VERSION`) the
        log holds after `after`, up to `until` (inclusive; None for the high-water mark):
        a `TypeCount` for each, by type and version. `types` narrows it to some types.

        On SQLite and PostgreSQL the database counts them in one statement (a GROUP BY
        of the type and the metadata's version), no event read out or decoded: the cost
        grows with the events counted, which `after`, `until` and `types` bound. What
        retention removed is not counted.
        """
        call = arguments.read_all_call(after, None, None, types)
        last = arguments.until_call(until)
        return self._backend.count_types(after=call.after, until=last, types=call.types)

    def read_query(self, query: Query, after: int = 0, limit: int | None = None) -> QueryResult:
        """The events matching `query` with position > `after`, in position order, and the
        position the read covered: `head`, the `after` of the `AppendCondition` for a
        decision made on these events.

        Every matching event up to `head` is in the result, and none can be stored
        there later. `head` is the high-water mark, or on PostgreSQL, for a query whose
        items all have tags, the top of the log as the read found it (the read waits
        for writers of its tags; docs/ARCHITECTURE.md); with `limit`, the position of
        the `limit`-th event when the read stopped there.
        """
        query, after, limit = arguments.read_query_call(query, after, limit)
        telemetry.count_read("query", self.tenant)
        found = self._backend.read_query(query, after=after, limit=limit)
        events = list(self._shredder.opened(iter(found.events)))
        return QueryResult(events, found.head)

    def read_all_encoded(
        self,
        after: int = 0,
        until: int | None = None,
        *,
        categories: Sequence[str] | str | None = None,
        types: Sequence[str] | str | None = None,
    ) -> Iterator[EncodedRecord]:
        """`read_all` from `after` to `until` (inclusive; None for the high-water mark), each
        event as an `EncodedRecord`: its fields as stored, nothing decoded.

        For readers that write events out again (an export, a download): it
        costs a fraction of `read_all`.
        """
        call = arguments.read_all_call(after, None, categories, types)
        last = arguments.until_call(until)
        telemetry.count_read("all_encoded", self.tenant)
        return self._shredder.opened_records(
            self._backend.read_all_encoded(
                after=call.after, until=last, categories=call.categories, types=call.types
            )
        )

    def read_all_json(
        self,
        after: int = 0,
        until: int | None = None,
        *,
        categories: Sequence[str] | str | None = None,
    ) -> Iterator[JsonLines]:
        """`read_all_encoded` as JSON lines, thousands at a time: each event one JSON object
        with every field, keys sorted, `data` and `metadata` as stored (`json_lines.py`).

        What an export writes: on PostgreSQL the lines are made straight from
        the copied rows, at a fraction of the cost of anything that builds an
        object per event.
        """
        call = arguments.read_all_call(after, None, categories, None)
        last = arguments.until_call(until)
        telemetry.count_read("all_json", self.tenant)
        chunks = self._backend.read_all_json(
            after=call.after, until=last, categories=call.categories
        )
        return chunks if self._shredder.sealed else self._opened_json(chunks)

    def _opened_json(self, chunks: Iterator[JsonLines]) -> Iterator[JsonLines]:
        for chunk in chunks:
            if json_lines.holds_sealed(chunk):
                chunk = json_lines.opened(chunk, self._shredder.opened_records)
            yield chunk

    def open_events(self, events: Iterable[RecordedEvent]) -> Iterator[RecordedEvent]:
        """`events` read elsewhere as stored (from the archive), their personal fields opened
        as this store's own reads open them."""
        return self._shredder.opened(_each(events))

    def high_water_mark(self) -> int:
        """The position up to which the log is complete: no event can appear below it."""
        return self._backend.high_water_mark()

    def read_event(self, event_id: uuid.UUID) -> RecordedEvent | None:
        """The event stored with `event_id`, or None if no event has that id."""
        return self._shredder.opened_event(
            self._backend.read_event(arguments.event_id_call(event_id))
        )

    def now(self) -> datetime:
        """The database's time (UTC), as it stamps `recorded_at`: what a lease recorded in an
        event is timed by, so that processes whose clocks differ agree on when it ends."""
        return self._backend.now()

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
        return self._backend.wait_for_events(*arguments.wait_call(after, timeout))

    def stream_version(self, stream_id: str) -> int:
        """The stream's current version (its event count); 0 if it has none."""
        return self._backend.stream_version(arguments.stream_id_call(stream_id))

    def list_streams(
        self, category: str | None = None, after: str | None = None, limit: int | None = None
    ) -> Iterator[StreamInfo]:
        """Streams ordered by id, optionally of one category, after a given id."""
        category, after, limit = arguments.list_streams_call(category, after, limit)
        return self._backend.list_streams(category=category, after=after, limit=limit)

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
        data = self._shredder.seal_snapshot(arguments.stream_id_call(stream_id), data)
        self._backend.save_snapshot(
            arguments.snapshot_call(stream_id, version, type, data, schema_version)
        )

    def load_snapshot(self, stream_id: str) -> Snapshot | None:
        """The newest snapshot of `stream_id`, or None."""
        return self._shredder.opened_snapshot(
            self._backend.load_snapshot(arguments.stream_id_call(stream_id))
        )

    def delete_stream(
        self,
        stream_id: str,
        expected_version: ExpectedVersion = ANY,
        *,
        tombstone: bool = False,
        deleted_at: datetime | None = None,
    ) -> StreamDeletion:
        """Delete `stream_id` if it is at `expected_version`: reads no longer show it, the
        global log keeps its events until retention removes them (archived first).

        An append brings a deleted stream back, its versions going on after the last
        one deleted; with `tombstone`, the stream can never be written again
        (`StreamTombstoned`). Raises `WrongExpectedVersion` (nothing deleted) when the
        stream is not at `expected_version`. `deleted_at` (timezone-aware) is the time the
        deletion keeps instead of now: an import gives the original's, as it gives events
        their `recorded_at`. See `eventstore/deletion.py`.
        """
        return self._backend.delete_stream(
            *arguments.delete_stream_call(stream_id, expected_version, tombstone, deleted_at)
        )

    def stream_deletion(self, stream_id: str) -> StreamDeletion | None:
        """How `stream_id` was deleted, None if it never was."""
        return self._backend.stream_deletion(arguments.stream_id_call(stream_id))

    def placed_deletions(
        self,
        after: int = 0,
        until: int | None = None,
        *,
        categories: Sequence[str] | str | None = None,
    ) -> list[tuple[int, StreamDeletion]]:
        """The streams (of `categories`, if given) deleted at an event with a position
        after `after` (up to `until`), as (that event's position, the deletion), in
        position order: where a copy of the log must delete them (an export writes each
        after that event's line).

        One query, however many streams the log holds. A stream deleted (or
        tombstoned) before its first event stands before every event, at position
        0: listed when `after` is 0."""
        after, last, names = arguments.placed_call(after, until, categories)
        return of_categories(self._backend.placed_deletions(after, last), names)

    @property
    def retention(self) -> Retention:
        """The store's retention: its runs, and removing events by rules (`retention.py`).
        `eventcraft.operations.retention` archives the log first, then removes."""
        if self._retention is None:
            self._retention = retention_for(self.url)
        return self._retention

    def low_water_mark(self) -> int:
        """Where the log in the store begins to be whole: 0 until retention removed events.
        Every event at or below it is in the archive the last run names
        (`retention.runs()`), and only some are in the store; above it, all are."""
        return self.retention.low_water_mark()

    @property
    def keys(self) -> KeyStore:
        """The key store personal fields are sealed with (opened when first used)."""
        return self._shredder.keys

    def forget(self, subject: str) -> int:
        """Delete `subject`'s key: from now on every reader sees its personal fields as
        their replacement (`FORGOTTEN` unless the field names another).

        The key is erased from the key store's database files (see
        `sqlite/key_table.py`); other processes stop opening the fields once their
        cached copy of the key expires (`KeyStore.cache_seconds`). Returns how
        many keys were erased: 0 if the subject had none, or was forgotten.
        """
        return self._shredder.forget(subject)

    def for_tenant(self, tenant: str) -> EventStore:
        """The store of `tenant`, from the tenants this store was opened with
        (`tenants=`): a store like this one, holding only that tenant's events.
        `InvalidTenant` if the tenant id is refused (`check_tenant`), or this store has no
        tenants.

        Example::

            from eventcraft.eventstore import EventStore, Tenants, NewEvent

            tenants = Tenants("sqlite:///tenant-{tenant}.db")
            with EventStore.open("sqlite:///shop.db", tenants=tenants) as shop:
                acme = shop.for_tenant("acme")
                acme.append("order-1", [NewEvent("Placed", {})])
                assert acme.stream_version("order-1") == 1
                assert shop.stream_version("order-1") == 0  # the shop's own log
        """
        if self._tenancy is None:
            raise InvalidTenant(
                f"this store has no tenants: open it with tenants= naming where each "
                f"tenant's store is (a URL with {{tenant}}, or a function), or open one "
                f"tenant's store with ?tenant= (for_tenant({tenant!r}) was asked); tenants "
                "side by side in this store's database are not built yet"
            )
        return self._tenancy.for_tenant(tenant)

    def drop_tenant(self) -> TenantDrop:
        """Remove everything of this store's tenant and close the store: its schema,
        database or file, with every table in it (events, snapshots, deletions, tags, keys,
        retention runs, read models kept there), and the archive folders its retention
        runs wrote. Other tenants are untouched.

        Refused (`InvalidTenant`) for a store of no tenant: the un-tenanted store is never
        dropped. Stop what uses the tenant in other processes first: a SQLite file removed
        under another process is written to in vain, and a PostgreSQL database in use is
        refused (`StoreUnavailable`).

        Example::

            from pathlib import Path

            from eventcraft.eventstore import EventStore, NewEvent

            url = "sqlite:///tenant-{tenant}.db?tenant=acme"
            acme = EventStore.open(url)
            acme.append("order-1", [NewEvent("Placed", {})])
            dropped = acme.drop_tenant()
            assert (dropped.place.name, dropped.existed) == ("tenant-acme.db", True)
            assert not Path("tenant-acme.db").exists()
        """
        if self._place is None:
            raise InvalidTenant(
                "this store is no tenant's: drop_tenant removes a tenant's store, never the "
                "un-tenanted store (drop a tenant with store.for_tenant(tenant).drop_tenant())"
            )
        runs = self.retention.runs()
        self.close()
        archives = [run.archive for run in runs]
        return tenant_places.drop(self._place, archives)

    def close(self) -> None:
        self._backend.close()
        self._shredder.close()
        if self._retention is not None:
            self._retention.close()
        if self._tenancy is not None:
            self._tenancy.close()

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
        return f"EventStore.open({arguments.redacted(self.url)!r})"


_each = iter
